"""GLUE fine-tuning support: the nine tasks (`tasks`), their data from the Hub, the original TSV files or the
user's own files brought to one schema (`data`), and the GLUE metric that ships with casan_hf (`metrics`)."""
