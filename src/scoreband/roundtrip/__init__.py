"""Round-trip generation metric (a text-to-image round trip): caption -> text-to-image -> image encoder -> cosine similarity, and a calibrated band around it."""
