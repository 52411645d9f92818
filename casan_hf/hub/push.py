"""The commit to the Hub: `push_folder` checks a folder (`casan_hf.hub.checks`: what a push sends and the checks it
passes) and makes the repository's branch hold exactly the folder's files, in one commit. `scripts/push_to_hub.py`
and the training scripts' `--push_to_hub` (`CasanTrainer.push_to_hub`) both push through it. Before the repository
is created the Hub validates the card's metadata (`ModelCard.validate`: licence, pipeline tag, model-index).
"""

from contextlib import contextmanager
from hashlib import sha256
from typing import NamedTuple

from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi
from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError
from huggingface_hub.utils import filter_repo_objects
from huggingface_hub.utils.sha import git_hash

from .card import card_for_repository
from .checks import MAX_FILE_BYTES, FolderCheckError, one_line, run_checks, staged, upload_files
from .folder import MODEL_CARD_NAME, is_hub_id


class Plan(NamedTuple):
    """What a push does to the branch: the files it adds, changes (other bytes), leaves as they are, deletes."""

    added: list
    changed: list
    unchanged: list
    deleted: list

    def lines(self):
        return [
            f"{what} {name}"
            for what, names in (("added", self.added), ("changed", self.changed), ("deleted", self.deleted))
            for name in names
        ]


def remote_files(api, repo_id, revision):
    """{path: RepoFile} of the branch `revision` (None: main), or of main where the branch is not made yet; {} where
    the repository does not exist."""
    for branch in dict.fromkeys([revision or "main", "main"]):
        try:
            tree = api.list_repo_tree(repo_id, revision=branch, recursive=True)
            return {entry.path: entry for entry in tree if hasattr(entry, "blob_id")}
        except RevisionNotFoundError:
            continue
        except RepositoryNotFoundError:
            return {}
    return {}


def same_bytes(path, entry):
    data = path.read_bytes()
    return entry.lfs.sha256 == sha256(data).hexdigest() if entry.lfs else entry.blob_id == git_hash(data)


def plan_push(stage, files, remote, keep_patterns=()):
    """The `Plan` of making the branch whose files are `remote` hold `files` (staged in `stage`): every remote file
    the folder does not hold is deleted, as `upload_folder`'s `delete_patterns` would, but those matching
    `keep_patterns` and `.gitattributes`, which the Hub keeps."""
    added = [name for name in files if name not in remote]
    changed = [name for name in files if name in remote and not same_bytes(stage / name, remote[name])]
    unchanged = [name for name in files if name in remote and name not in changed]
    stale = [name for name in sorted(remote) if name not in files and name != ".gitattributes"]
    deleted = list(filter_repo_objects(stale, ignore_patterns=list(keep_patterns) or None))
    return Plan(added, changed, unchanged, deleted)


@contextmanager
def reaching_the_hub(repo_id, what):
    """Any error on the way to and from the Hub (offline mode, no connection, a refusal) as one line naming `what`
    was asked. The HTTP clients' errors share no base class across huggingface_hub's releases, hence `Exception`."""
    try:
        yield
    except FolderCheckError:
        raise
    except Exception as error:
        raise FolderCheckError(f"{repo_id}: {what} failed ({type(error).__name__}: {one_line(error)}).") from None


def check_repo_id(repo_id):
    """A repository id with its owner (`you/name`), as huggingface_hub validates it: the card's examples must load
    the repository pushed to, and a bare name would become `<your user>/name` on the Hub."""
    if not is_hub_id(repo_id) or "/" not in repo_id:
        raise FolderCheckError(
            f"{repo_id!r}: not a repository id with its owner, such as 'you/{str(repo_id).split('/')[-1]}'; the "
            "card's examples load the repository by that id."
        )


def validate_on_the_hub(card):
    """The Hub's own validation of the card's metadata (licence, pipeline tag, model-index), by huggingface_hub."""
    try:
        card.validate()
    except ValueError as error:
        raise FolderCheckError(f"{MODEL_CARD_NAME}: the Hub refuses its metadata ({one_line(error)}).") from None


def push_folder(
    folder,
    repo_id,
    revision=None,
    private=None,
    token=None,
    commit_message="Upload with casan-hf",
    keep_patterns=(),
    max_file_bytes=MAX_FILE_BYTES,
    dry_run=False,
    render_card=False,
):
    """Checks `folder` (`checks.run_checks`, and the Hub's validation of its card), then makes the branch `revision`
    (None: main; created from main if need be) of `repo_id` hold exactly the folder's `upload_files`, in one commit:
    the staged bytes added, every other file of the branch deleted but `keep_patterns`. `render_card`: the card sent
    is the folder's rendered for `repo_id` (`card_for_repository`), the folder's own left as it is. The repository
    is created (private if `private`, else as the Hub's default for its owner) only once everything is checked, and
    deleted again when it was created here and the commit fails. Returns `(plan, CommitInfo)`; `dry_run`: the plan
    alone, nothing sent. Every failure is a one-line FolderCheckError."""
    check_repo_id(repo_id)
    files = upload_files(folder, max_file_bytes)
    api = HfApi(token=token)
    with staged(folder, files) as stage:
        if render_card and MODEL_CARD_NAME in files:
            card_path = stage / MODEL_CARD_NAME
            card_path.write_text(card_for_repository(card_path.read_text(encoding="utf-8"), repo_id), encoding="utf-8")
        card = run_checks(folder, stage, files, repo_id)
        with reaching_the_hub(repo_id, "the Hub's validation of README.md"):
            validate_on_the_hub(card)
        with reaching_the_hub(repo_id, "listing the branch's files"):
            remote = remote_files(api, repo_id, revision)
        plan = plan_push(stage, files, remote, keep_patterns)
        if dry_run:
            return plan, None
        with reaching_the_hub(repo_id, "creating the repository"):
            created = not remote and not api.repo_exists(repo_id)
            repo_id = api.create_repo(repo_id, private=private, exist_ok=True).repo_id  # "name": "user/name"
        operations = [CommitOperationDelete(path_in_repo=name) for name in plan.deleted]
        operations += [CommitOperationAdd(path_in_repo=name, path_or_fileobj=str(stage / name)) for name in files]
        try:
            with reaching_the_hub(repo_id, "the commit"):
                if revision is not None:
                    api.create_branch(repo_id, branch=revision, exist_ok=True)
                commit = api.create_commit(repo_id, operations, commit_message=commit_message, revision=revision)
        except FolderCheckError as error:
            if not created:
                raise
            with reaching_the_hub(repo_id, f"{error} Deleting the repository this push created"):
                api.delete_repo(repo_id)
            raise FolderCheckError(f"{error} The repository this push created is deleted again.") from None
    return plan, commit
