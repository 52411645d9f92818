"""olah, the Hub-protocol server of the Hub tests, answering as the Hub does where a mirrored repository lacks
what is asked for. Run by `hub_server.HubServer` with the interpreter of olah's own environment (.venv-olah):

    .venv-olah/bin/python tests/olah_server.py --config olah.toml

In offline mode olah serves the git repositories under its `mirrors-path` unchanged; for anything a repository
does not hold it falls back to the upstream Hub, which offline answers 401 "Repository not found". The Hub
itself answers a file or folder missing from an existing revision with 404 EntryNotFound, which clients take as
"not there": transformers probes `adapter_config.json` on every load and `additional_chat_templates/` on every
tokenizer load, and a 401 there stops the load. (olah answers a GET of such a file with a 500). So this
launcher adds, in front of olah's routes, the Hub's answers for the repositories of the mirrors folder:

- a file or tree path that an existing revision does not hold is 404 EntryNotFound;
- `/api/models/<org>/<name>` (no revision: what `model_info` and `ModelCard.load` ask) is the default branch's
  `/revision/main`, which olah serves.

olah serves and has no upload API, so the launcher also answers the Hub's write API that `huggingface_hub` calls to
upload (`HfApi.create_repo`, `create_branch`, `create_commit`), for repositories in the first mirrors folder:

- `POST /api/repos/create` makes a git repository with an empty first commit on `main`;
- `POST /api/models/<repo>/branch/<branch>` makes a branch from `main`;
- `POST /api/validate-yaml` answers whether a card's metadata block parses;
- `POST /api/models/<repo>/preupload/<revision>` answers "regular" for every file: its content comes inline in the
  commit (the Hub keeps large files in LFS, which this server does not serve);
- `POST /api/models/<repo>/commit/<revision>` writes one git commit of the added files on top of the revision.

Each write is appended to `hub_writes.jsonl` beside the mirrors folder, which the tests read
(`hub_server.HubServer.writes`). Nothing of the project, of olah's package or of the clients is changed; the tests
load and upload through unmodified `huggingface_hub` and `transformers`.
"""

import base64
import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

import git
import yaml
from fastapi.responses import JSONResponse, Response
from olah import server


# /<org>/<name>/resolve/<revision>/<file> and /api/models/<org>/<name>/tree/<revision>/<path>
ENTRY = re.compile(r"^/(?:api/models/)?(?P<repo>[^/]+/[^/]+)/(?:resolve|tree)/(?P<revision>[^/]+)/(?P<path>.+)$")
MODEL_INFO = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)$")
WRITE = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/(?P<action>preupload|commit|branch)/(?P<revision>[^/]+)$")
GIT_IDENTITY = {
    **{f"GIT_{who}_NAME": "casan-hf tests" for who in ("AUTHOR", "COMMITTER")},
    **{f"GIT_{who}_EMAIL": "tests@casan-hf.invalid" for who in ("AUTHOR", "COMMITTER")},
}


def mirrored_commit(repo, revision):
    """The commit `revision` (a branch or a commit id) of the model repository `repo` in a mirrors folder, or None
    where the mirrors hold no such repository or revision (olah's own answer stands then)."""
    for mirrors in server.app.state.app_settings.config.mirrors_path:
        folder = os.path.join(mirrors, "models", repo)
        if os.path.isdir(folder):
            try:
                return git.Repo(folder).commit(revision)
            except (git.exc.BadName, git.exc.BadObject, ValueError):
                return None
    return None


def holds(commit, path):
    try:
        commit.tree[path.strip("/")]
    except KeyError:
        return False
    return True


def mirrors_folder():
    return Path(server.app.state.app_settings.config.mirrors_path[0])


def run_git(repo, *args, stdin=None, env=None):
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        input=stdin,
        capture_output=True,
        check=True,
        env={**os.environ, **(env or {})},
    )
    return done.stdout.decode().strip()


def record_write(entry):
    with open(mirrors_folder().parent / "hub_writes.jsonl", "a") as handle:
        handle.write(json.dumps(entry) + "\n")


def create_repo(payload):
    repo_id = f"{payload['organization']}/{payload['name']}"
    folder = mirrors_folder() / "models" / repo_id
    url = (
        f"{server.app.state.app_settings.config.mirror_scheme}://{server.app.state.app_settings.config.mirror_netloc}"
    )
    if folder.is_dir():
        return JSONResponse({"error": "You already created this model repo", "url": f"{url}/{repo_id}"}, 409)
    folder.mkdir(parents=True)
    run_git(folder, "init", "--quiet", "--initial-branch", "main")
    empty_tree = run_git(folder, "hash-object", "-t", "tree", "-w", "--stdin", stdin=b"")
    first = run_git(folder, "commit-tree", empty_tree, "-m", "initial commit", env=GIT_IDENTITY)
    run_git(folder, "update-ref", "refs/heads/main", first)
    record_write({"action": "create", "repo": repo_id, "visibility": payload.get("visibility")})
    return JSONResponse({"url": f"{url}/{repo_id}", "name": repo_id})


def commit(folder, revision, lines):
    """One commit on `revision` of `folder` adding the NDJSON body's files; returns its id and the files."""
    header, *operations = [json.loads(line) for line in lines if line.strip()]
    refused = [operation["key"] for operation in operations if operation["key"] != "file"]
    if refused:
        raise ValueError(f"this server takes inline files only, not {refused[0]}")
    parent = run_git(folder, "rev-parse", "--verify", f"refs/heads/{revision}")
    with tempfile.TemporaryDirectory() as scratch:
        index = {"GIT_INDEX_FILE": os.path.join(scratch, "index")}
        run_git(folder, "read-tree", parent, env=index)
        for operation in operations:
            content = base64.b64decode(operation["value"]["content"])
            blob = run_git(folder, "hash-object", "-w", "--stdin", stdin=content)
            run_git(folder, "update-index", "--add", "--cacheinfo", f"100644,{blob},{operation['value']['path']}",
                    env=index)  # fmt: skip
        tree = run_git(folder, "write-tree", env=index)
    summary = header["value"]["summary"]
    new = run_git(folder, "commit-tree", tree, "-p", parent, "-m", summary, env=GIT_IDENTITY)
    run_git(folder, "update-ref", f"refs/heads/{revision}", new)
    return new, [operation["value"]["path"] for operation in operations]


async def write(request, repo_id, action, revision):
    folder = mirrors_folder() / "models" / repo_id
    if not folder.is_dir():
        return JSONResponse({"error": "Repository not found"}, 404, headers={"x-error-code": "RepoNotFound"})
    if action == "branch":
        if run_git(folder, "branch", "--list", revision):
            return JSONResponse({"error": f"Reference {revision} already exists"}, 409)
        run_git(folder, "branch", revision, "main")
        record_write({"action": "branch", "repo": repo_id, "branch": revision})
        return JSONResponse({})
    if action == "preupload":
        files = (await request.json())["files"]
        return JSONResponse(
            {"files": [{"path": file["path"], "uploadMode": "regular", "shouldIgnore": False} for file in files]}
        )
    try:
        new, paths = commit(folder, revision, (await request.body()).decode().splitlines())
    except (ValueError, subprocess.CalledProcessError) as error:
        return JSONResponse({"error": str(error)}, 400)
    record_write({"action": "commit", "repo": repo_id, "revision": revision, "commit": new, "files": paths})
    base = f"{request.url.scheme}://{request.url.netloc}"
    return JSONResponse({"commitUrl": f"{base}/{repo_id}/commit/{new}", "commitOid": new, "success": True})


def validate_yaml(payload):
    text = payload["content"]
    try:
        if text.startswith("---"):
            yaml.safe_load(text.split("---", 2)[1])
    except yaml.YAMLError as error:
        return JSONResponse({"errors": [{"message": str(error)}]}, 400)
    return JSONResponse({"errors": [], "warnings": []})


@server.app.middleware("http")
async def answer_as_the_hub(request, call_next):
    path = request.scope["path"]
    if request.method == "POST":
        if path == "/api/repos/create":
            return create_repo(await request.json())
        if path == "/api/validate-yaml":
            return validate_yaml(await request.json())
        written = WRITE.match(path)
        if written:
            return await write(request, written["repo"], written["action"], written["revision"])
    model_info = MODEL_INFO.match(path)
    if model_info and mirrored_commit(model_info["repo"], "main") is not None:
        request.scope["path"] = f"{path}/revision/main"
        request.scope["raw_path"] = request.scope["path"].encode()
    entry = ENTRY.match(path)
    commit = mirrored_commit(entry["repo"], entry["revision"]) if entry else None
    if commit is not None and not holds(commit, entry["path"]):
        message = f'{entry["path"]} does not exist on "{entry["revision"]}"'
        return Response(status_code=404, headers={"x-error-code": "EntryNotFound", "x-error-message": message})
    return await call_next(request)


if __name__ == "__main__":
    server.main()
