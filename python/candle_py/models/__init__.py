"""`candle_py.models`: whole models written with candle_py's layers.

`models.llama`: Llama-family causal language models from GGUF files;
`models.tokenizer`: their tokenizer, from the same file's metadata;
`models.generation`: sampling and streamed generation.
"""

from . import generation, llama, tokenizer

__all__ = ["llama", "tokenizer", "generation"]
