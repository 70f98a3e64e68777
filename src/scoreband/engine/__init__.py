"""The batch engine: tables read and written in chunks, so memory stays bounded whatever a
table's size (``stream``)."""

from scoreband.engine.stream import STREAMABLE, ChunkWriter, iter_chunks

__all__ = ["iter_chunks", "ChunkWriter", "STREAMABLE"]
