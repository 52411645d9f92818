"""Run Python code in a new process in which `import casan_hf` fails, as on a machine that only has
`transformers`: what users of a shared checkpoint get with `trust_remote_code=True` (`casan_hf.hub.fresh_process`,
which the push's load check uses too)."""

from casan_hf.hub.fresh_process import run_without_casan_hf


__all__ = ["run_without_casan_hf"]
