#!/usr/bin/env python
"""Checks a Hub-ready folder and makes a Hub repository's branch hold exactly its files, in one commit
(`casan_hf.hub.checks`, `casan_hf.hub.push`, docs/HUB.md): the files are copied once into a staging folder that
every check reads and the upload sends (no link followed, hidden files, Trainer's private files and the run record
left out, nothing that unpickles, no credential); weights in safetensors; `config.json` with an `auto_map` and every
code file it needs (a plain transformers model needs none); a model card whose metadata parses and the Hub accepts,
whose `base_model` is a Hub id, whose scores are the folder's results files' and whose examples load the repository
pushed to (`--render_card` renders them for it in what is sent); no local path in any text file; a load without
casan_hf that gives the folder's outputs. Files of the branch the folder does not hold are deleted (`--keep PATTERN`
keeps them). A folder that fails a check is refused in one line, naming the file or field, before the repository is
created or anything is sent.

    python scripts/push_to_hub.py outputs/minilm-casan-deep_global-mrpc --repo_id you/casan-mrpc --dry_run
"""

import argparse
import sys

from casan_hf.hub.push import MAX_FILE_BYTES, FolderCheckError, push_folder


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="The folder to upload (a script's --output_dir, or a saved CASAN model).")
    parser.add_argument("--repo_id", required=True, help="The Hub repository, you/name (created if need be).")
    parser.add_argument("--revision", help="The branch to commit to (created from main if need be); default main.")
    parser.add_argument("--private", action="store_true", help="Create the repository private.")
    parser.add_argument(
        "--keep",
        action="append",
        default=[],
        metavar="PATTERN",
        help="Keep the branch's files that match PATTERN (fnmatch, repeatable) though the folder lacks them; "
        "'*' keeps every file. Default: the branch ends holding the folder's files only.",
    )
    parser.add_argument(
        "--allow_large_files", action="store_true", help="Send files larger than 5 GB (save_pretrained's shards)."
    )
    parser.add_argument(
        "--dry_run", action="store_true", help="Check the folder and list what the commit would add, change, delete."
    )
    parser.add_argument(
        "--render_card",
        action="store_true",
        help="Send the model card rendered for --repo_id (its name and the model its examples load), as a folder "
        "converted or trained under another name needs; the folder's own card is left as it is.",
    )
    args = parser.parse_args(argv)
    try:
        plan, commit = push_folder(
            args.folder,
            args.repo_id,
            revision=args.revision,
            private=args.private or None,
            keep_patterns=args.keep,
            max_file_bytes=None if args.allow_large_files else MAX_FILE_BYTES,
            dry_run=args.dry_run,
            render_card=args.render_card,
        )
    except FolderCheckError as error:
        print(f"push_to_hub.py: {args.folder} is not pushed: {error}", file=sys.stderr)
        raise SystemExit(1) from None
    if args.dry_run:
        print(f"Would commit to {args.repo_id} ({args.revision or 'main'}), nothing sent yet:")
    else:
        print(f"Committed {args.folder} to {args.repo_id} ({args.revision or 'main'}): {commit.commit_url}")
    print("\n".join(plan.lines() or ["no change"]))


if __name__ == "__main__":
    main()
