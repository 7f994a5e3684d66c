"""Retrieval: what a question is matched against and how.

`catalog` turns catalogs into documents and ranks capabilities (`CatalogIndex`, flat or two-level);
`hybrid` is the dense + BM25 index under it; `text` tokenises; `embeddings` holds the embedding models
(the shipped ONNX ones and any OpenAI-compatible endpoint); `intent` classifies a question's intent.
"""
