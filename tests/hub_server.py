"""A Hub-protocol server for the tests: olah, in its own environment (.venv-olah, pinned in constraints-olah.txt,
made by `make test`), bound to 127.0.0.1 on a free port, serving git repositories from a mirrors folder in
offline mode (tests/olah_server.py adds the Hub's answer for a missing file, and the Hub's upload API).
`publish` makes a git commit of a folder's files directly; an upload through `huggingface_hub` (`push_folder`) goes
through the server's upload API; a process started with `client_env()` loads from the server by repo id with
unmodified `huggingface_hub` and `transformers`."""

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import httpx2
from huggingface_hub.errors import HfHubHTTPError, RepositoryNotFoundError
from huggingface_hub.hf_api import RepoFile
from huggingface_hub.utils.sha import git_hash
from local_server import free_port


REPO_ROOT = Path(__file__).resolve().parents[1]
OLAH_PYTHON = REPO_ROOT / ".venv-olah" / "bin" / "python"
LAUNCHER = Path(__file__).with_name("olah_server.py")
GIT_IDENTITY = ["-c", "user.name=casan-hf tests", "-c", "user.email=tests@casan-hf.invalid"]


class HubServer:
    """olah serving `root/mirrors`; `start()` waits until it answers, `stop()` ends it by its process id."""

    def __init__(self, root, python=OLAH_PYTHON):
        self.root = Path(root)
        self.mirrors = self.root / "mirrors"
        self.python = python
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = None

    def start(self, timeout=60):
        self.mirrors.mkdir(parents=True, exist_ok=True)
        config = self.root / "olah.toml"
        config.write_text(
            "[basic]\n"
            'host = "127.0.0.1"\n'
            f"port = {self.port}\n"
            f'mirror-netloc = "127.0.0.1:{self.port}"\n'
            f'mirror-lfs-netloc = "127.0.0.1:{self.port}"\n'
            f'repos-path = "{self.root / "cache"}"\n'
            f'mirrors-path = ["{self.mirrors}"]\n'
            "[accessibility]\n"
            "offline = true\n"
        )
        self.log = open(self.root / "olah.log", "w")  # open for the server's lifetime
        # olah writes its own log files into ./logs: the server runs in its folder.
        self.process = subprocess.Popen(
            [str(self.python), str(LAUNCHER), "--config", str(config)],
            cwd=self.root,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"olah exited with {self.process.returncode}:\n{self.log_text()}")
            try:
                urllib.request.urlopen(f"{self.url}/api/whoami-v2", timeout=2)
                return self
            except urllib.error.HTTPError:
                return self  # it answers (401 without a token): it is up
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"olah did not answer on {self.url} within {timeout} s:\n{self.log_text()}")

    def stop(self):
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self.process is not None:
            self.log.close()

    def log_text(self):
        return (self.root / "olah.log").read_text(errors="replace")

    def publish(self, repo_id, files, message="Upload"):
        """Commits exactly `files` ({path in the repo: local file}) as the new state of `repo_id`'s main branch
        (created on first use); returns the commit id."""
        repo = self.mirrors / "models" / repo_id
        if not (repo / ".git").is_dir():
            repo.mkdir(parents=True)
            self.git(repo, "init", "--quiet", "--initial-branch", "main")
        for entry in repo.iterdir():
            if entry.name != ".git":
                shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
        for name, source in files.items():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, repo / name)
        self.git(repo, "add", "--all")
        self.git(repo, *GIT_IDENTITY, "commit", "--quiet", "--allow-empty", "--message", message)
        return self.git(repo, "rev-parse", "HEAD")

    def publish_folder(self, repo_id, folder, message="Upload"):
        """Publishes every file of `folder` (as `huggingface-cli upload <repo> <folder>` sends them)."""
        folder = Path(folder)
        files = {path.relative_to(folder).as_posix(): path for path in sorted(folder.rglob("*")) if path.is_file()}
        return self.publish(repo_id, files, message)

    def repos(self):
        """The repo ids of the published models."""
        return sorted(
            f"{org.name}/{name.name}" for org in (self.mirrors / "models").iterdir() for name in org.iterdir()
        )

    def writes(self):
        """What clients wrote through the server's upload API (tests/olah_server.py): one dict per repository
        created, branch made or commit."""
        path = self.root / "hub_writes.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def files(self, repo_id, revision="main"):
        """The file paths of `repo_id` at `revision`, as the server has them."""
        listing = self.git(self.mirrors / "models" / repo_id, "ls-tree", "-r", "--name-only", revision)
        return sorted(listing.splitlines())

    @staticmethod
    def git(repo, *args):
        done = subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True)
        return done.stdout.strip()

    def client_env(self, home):
        """The environment of a process that loads from this server: online, against it, with an empty cache."""
        return {
            "HF_ENDPOINT": self.url,
            "HF_HUB_OFFLINE": "0",
            "TRANSFORMERS_OFFLINE": "0",
            "HF_DATASETS_OFFLINE": "0",
            "HF_HOME": str(home),
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
        }


class RecordingHubApi:
    """Stands in for `HfApi` in `casan_hf.hub.push` (`record_uploads` patches it in) where no Hub server runs:
    `remote` is the branch's files ({path: bytes}; None: no repository), `refuse_commits` makes each commit fail as
    the Hub's refusal does. Records each commit (repository, revision, the files it adds and deletes, the model card
    among them) and each repository deleted."""

    def __init__(self, remote=None, refuse_commits=False):
        self.remote, self.refuse_commits = remote, refuse_commits
        self.uploads, self.created, self.deleted_repos = [], [], []

    def list_repo_tree(self, repo_id, revision=None, recursive=False):
        if self.remote is None:
            raise RepositoryNotFoundError(f"{repo_id} not found", response=_response(404))
        return [RepoFile(path=path, size=len(data), oid=git_hash(data)) for path, data in self.remote.items()]

    def repo_exists(self, repo_id):
        return self.remote is not None

    def create_repo(self, repo_id, **kwargs):
        self.created.append(repo_id)
        return type("RepoUrl", (), {"repo_id": repo_id})()

    def delete_repo(self, repo_id):
        self.deleted_repos.append(repo_id)

    def create_commit(self, repo_id, operations, commit_message, revision=None):
        if self.refuse_commits:
            raise HfHubHTTPError("400 Bad Request: the commit is refused", response=_response(400))
        files = {op.path_in_repo: Path(op.path_or_fileobj) for op in operations if hasattr(op, "path_or_fileobj")}
        deleted = sorted(op.path_in_repo for op in operations if not hasattr(op, "path_or_fileobj"))
        card = files["README.md"].read_text() if "README.md" in files else None
        self.uploads.append(
            {"repo_id": repo_id, "revision": revision, "files": sorted(files), "deleted": deleted, "card": card}
        )
        return type("CommitInfo", (), {"commit_url": f"https://hub.invalid/{repo_id}/commit/1"})()


def _response(status):
    return httpx2.Response(status, request=httpx2.Request("POST", "https://hub.invalid"))


def record_uploads(monkeypatch, api=None):
    """Patches `casan_hf.hub.push` to push to `api` (a new `RecordingHubApi` by default), with the Hub's metadata
    validation taken as passed; returns the api."""
    import casan_hf.hub.push

    api = api or RecordingHubApi()
    monkeypatch.setattr(casan_hf.hub.push, "HfApi", lambda **kwargs: api)
    monkeypatch.setattr(casan_hf.hub.push, "validate_on_the_hub", lambda card: None)
    return api
