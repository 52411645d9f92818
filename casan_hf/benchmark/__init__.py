"""Speed and memory of CASAN next to transformers' BERT: round-robin timing and peak memory (`runner`,
`peak_memory`) and the cost floor they are compared with (`flops`). `scripts/benchmark.py` drives them."""
