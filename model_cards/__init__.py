"""The model card template every card is rendered from, installed as `casan_hf.model_cards` (pyproject.toml maps
this folder there), and the cards of the checkpoints casan-hf publishes (`make cards`, docs/HUB.md)."""
