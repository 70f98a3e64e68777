"""Round-trip generation metric (source 001): caption -> text-to-image -> image encoder -> cosine similarity, and a calibrated band around it."""
