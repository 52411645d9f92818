#!/usr/bin/env python
"""Checks a Hub-ready folder and uploads it to the Hub in one commit (`casan_hf.hub.push`): weights in safetensors
only, `config.json` with an `auto_map` and every code file it needs, a model card whose `base_model` is a Hub id and
whose scores are the folder's own results files, no local path in any text file, and a load without casan_hf that
gives the folder's outputs. A folder that fails a check is refused, naming the file or field, before anything is
sent.

    python scripts/push_to_hub.py outputs/minilm-casan-deep_global-mrpc --repo_id you/casan-mrpc --dry_run
"""

import argparse
import sys

from casan_hf.hub.push import FolderCheckError, check_folder, push_folder


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="The folder to upload (a script's --output_dir, or a saved CASAN model).")
    parser.add_argument("--repo_id", required=True, help="The Hub repository, you/name (created if need be).")
    parser.add_argument("--revision", help="The branch to commit to (created from main if need be); default main.")
    parser.add_argument("--private", action="store_true", help="Create the repository private.")
    parser.add_argument("--dry_run", action="store_true", help="Check the folder and list the files it would send.")
    args = parser.parse_args(argv)
    try:
        if args.dry_run:
            files = check_folder(args.folder)
        else:
            commit = push_folder(args.folder, args.repo_id, revision=args.revision, private=args.private or None)
    except FolderCheckError as error:
        print(f"push_to_hub.py: {args.folder} is not pushed: {error}", file=sys.stderr)
        raise SystemExit(1) from None
    if args.dry_run:
        print(f"Would upload to {args.repo_id} ({args.revision or 'main'}), in one commit:")
        print("\n".join(files))
    else:
        print(f"Uploaded {args.folder} to {args.repo_id}: {commit.commit_url}")


if __name__ == "__main__":
    main()
