"""Serve the explorer: a web page that shows a checkpoint's prediction, gates, attention and pooling hops on the
text you type, with a second checkpoint side by side (`--compare`), or write it as a Hub Space (`--space_dir`).

    python scripts/explore.py --model DIR_OR_ID [--compare DIR_OR_ID] [--port 7860] [--host 127.0.0.1]
    python scripts/explore.py --model USER/CASAN-MODEL --space_dir my-space

Needs casan-hf[demo] (Gradio): `make install-demo` builds its environment, .venv-demo. The page listens on the
loopback only unless --host says otherwise (0.0.0.0: every interface). See docs/EXPLORER.md.
"""

import argparse

from casan_hf.inspection import MAX_TOKENS


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--model",
        required=True,
        help="CASAN or BERT-family encoder checkpoint: a folder or a Hub id (a causal LM's: plot_attention.py).",
    )
    parser.add_argument("--compare", help="A second checkpoint shown beside it (e.g. its --baseline twin).")
    parser.add_argument("--text", help="The text the page opens with (default: a sentence about a film).")
    parser.add_argument("--text_pair", default="", help="The text pair the page opens with.")
    parser.add_argument("--port", type=int, default=7860, help="Port to serve on (default: 7860).")
    parser.add_argument("--host", default="127.0.0.1", help="Address to listen on (default: 127.0.0.1, loopback).")
    parser.add_argument(
        "--max_tokens",
        type=int,
        default=MAX_TOKENS,
        help=f"Cut texts to this many tokens (default: {MAX_TOKENS}, the most the maps keep readable).",
    )
    parser.add_argument("--space_dir", help="Write a Hub Space folder here (--model is a Hub id) instead of serving.")
    parser.add_argument("--overwrite_space_dir", action="store_true", help="Write into a non-empty --space_dir.")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"--port must be in 1..65535; got {args.port}.")
    if args.max_tokens < 3:
        parser.error(f"--max_tokens must be at least 3 (room for the special tokens); got {args.max_tokens}.")
    return parser, args


def main(argv=None):
    parser, args = parse_args(argv)
    if args.space_dir:
        from casan_hf.explorer.space import write_space

        try:
            files = write_space(args.space_dir, args.model, args.compare, overwrite=args.overwrite_space_dir)
        except (ValueError, RuntimeError) as error:
            parser.error(str(error))
        print(f"Wrote the Space for {args.model} to {args.space_dir}: {len(files)} files.")
        return

    from casan_hf.explorer.app import DEFAULT_TEXT, build_app
    from casan_hf.explorer.views import ModelCache

    # The checkpoints are loaded before serving: a wrong name is a usage error now, not a surprise on the page.
    cache = ModelCache()
    names = [name for name in (args.model, args.compare) if name]
    try:
        cache.get(names)
    except ValueError as error:
        parser.error(str(error))
    app = build_app(args.model, args.compare or "", args.text or DEFAULT_TEXT, args.text_pair, args.max_tokens, cache)
    print(f"Serving the explorer for {', '.join(names)} on http://{args.host}:{args.port}", flush=True)
    app.launch(server_name=args.host, server_port=args.port, show_error=True)


if __name__ == "__main__":
    main()
