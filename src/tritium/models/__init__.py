"""Models: configuration, layers (with tensor-parallel sharding hooks), the Llama-family decoder, weights."""
