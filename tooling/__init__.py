"""The repository's own tooling, kept out of the installed package: the committed studies (`catalog`), the docs'
results rendered from their records (`render`, `make docs`), the model cards of the release set (`release`,
`make cards`) and the data hashes of old records (`data_hashes`). It reads this checkout's docs/, docs/results/ and
model_cards/, which an install of casan-hf does not hold; the scripts of scripts/ find it from the checkout's root."""
