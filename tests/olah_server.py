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
- `POST /api/models/<repo>/preupload/<revision>` answers "regular" for every file: its content comes inline in the
  commit (the Hub keeps large files in LFS, which this server does not serve);
- `POST /api/models/<repo>/commit/<revision>` writes one git commit of the added and deleted files on top of the
  revision;
- `GET /api/models/<repo>/tree/<revision>` of a branch the repository lacks is 404 RevisionNotFound, as on the Hub;
- `POST /api/validate-yaml` refuses, as the Hub does, metadata that does not parse, a licence that is not one of
  the Hub's ids (`HUB_LICENSES`), a pipeline tag that is not one of its tasks (`HUB_PIPELINE_TAGS`: those of the
  tests' cards and the common others) and a `model-index` whose results lack a task, dataset or metrics.

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
TREE_ROOT = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/tree/(?P<revision>[^/]+)/?$")
WRITE = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)/(?P<action>preupload|commit|branch)/(?P<revision>[^/]+)$")
GIT_IDENTITY = {
    **{f"GIT_{who}_NAME": "casan-hf tests" for who in ("AUTHOR", "COMMITTER")},
    **{f"GIT_{who}_EMAIL": "tests@casan-hf.invalid" for who in ("AUTHOR", "COMMITTER")},
}


# The Hub's licence ids (huggingface.co/docs/hub/repositories-licenses).
HUB_LICENSES = set(
    "apache-2.0 mit openrail bigscience-openrail-m creativeml-openrail-m bigscience-bloom-rail-1.0 bigcode-openrail-m "
    "afl-3.0 artistic-2.0 bsl-1.0 bsd bsd-2-clause bsd-3-clause bsd-3-clause-clear c-uda cc cc0-1.0 cc-by-2.0 "
    "cc-by-2.5 cc-by-3.0 cc-by-4.0 cc-by-sa-3.0 cc-by-sa-4.0 cc-by-nc-2.0 cc-by-nc-3.0 cc-by-nc-4.0 cc-by-nd-4.0 "
    "cc-by-nc-nd-3.0 cc-by-nc-nd-4.0 cc-by-nc-sa-2.0 cc-by-nc-sa-3.0 cc-by-nc-sa-4.0 cdla-sharing-1.0 "
    "cdla-permissive-1.0 cdla-permissive-2.0 wtfpl ecl-2.0 epl-1.0 epl-2.0 etalab-2.0 eupl-1.1 eupl-1.2 agpl-3.0 gfdl "
    "gpl gpl-2.0 gpl-3.0 lgpl lgpl-2.1 lgpl-3.0 isc h-research intel-research lppl-1.3c ms-pl apple-ascl apple-amlr "
    "mpl-2.0 odc-by odbl openrail++ osl-3.0 postgresql ofl-1.1 ncsa unlicense zlib pddl lgpl-lr deepfloyd-if-license "
    "llama2 llama3 llama3.1 llama3.2 llama3.3 llama4 gemma unknown other".split()
)
HUB_PIPELINE_TAGS = set(
    "text-classification token-classification question-answering fill-mask feature-extraction translation "
    "sentence-similarity summarization text-generation text2text-generation zero-shot-classification "
    "multiple-choice table-question-answering image-classification automatic-speech-recognition".split()
)


def mirrored_repo(repo):
    """The git repository of the model `repo` in a mirrors folder, or None."""
    for mirrors in server.app.state.app_settings.config.mirrors_path:
        folder = os.path.join(mirrors, "models", repo)
        if os.path.isdir(folder):
            return git.Repo(folder)
    return None


def mirrored_commit(repo, revision):
    """The commit `revision` (a branch or a commit id) of the model repository `repo` in a mirrors folder, or None
    where the mirrors hold no such repository or revision (olah's own answer stands then)."""
    mirrored = mirrored_repo(repo)
    try:
        return mirrored.commit(revision) if mirrored is not None else None
    except (git.exc.BadName, git.exc.BadObject, ValueError):
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
    """One commit on `revision` of `folder` adding and deleting the NDJSON body's files; returns its id, the files
    added and the files deleted."""
    header, *operations = [json.loads(line) for line in lines if line.strip()]
    deleted = [operation["value"]["path"] for operation in operations if operation["key"] == "deletedFile"]
    operations = [operation for operation in operations if operation["key"] != "deletedFile"]
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
        for path in deleted:
            run_git(folder, "update-index", "--force-remove", path, env=index)
        tree = run_git(folder, "write-tree", env=index)
    summary = header["value"]["summary"]
    new = run_git(folder, "commit-tree", tree, "-p", parent, "-m", summary, env=GIT_IDENTITY)
    run_git(folder, "update-ref", f"refs/heads/{revision}", new)
    return new, [operation["value"]["path"] for operation in operations], deleted


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
        new, paths, deleted = commit(folder, revision, (await request.body()).decode().splitlines())
    except (ValueError, subprocess.CalledProcessError) as error:
        return JSONResponse({"error": str(error)}, 400)
    record_write(
        {"action": "commit", "repo": repo_id, "revision": revision, "commit": new, "files": paths, "deleted": deleted}
    )
    base = f"{request.url.scheme}://{request.url.netloc}"
    return JSONResponse({"commitUrl": f"{base}/{repo_id}/commit/{new}", "commitOid": new, "success": True})


def metadata_errors(metadata):
    """What the Hub's validation says of a model card's metadata: its licence, pipeline tag and model-index."""
    errors = []
    if "license" in metadata and metadata["license"] not in HUB_LICENSES:
        errors.append(f'"license" must be one of the Hub\'s licence ids, not {metadata["license"]!r}')
    if "pipeline_tag" in metadata and metadata["pipeline_tag"] not in HUB_PIPELINE_TAGS:
        errors.append(f'"pipeline_tag" must be one of the Hub\'s tasks, not {metadata["pipeline_tag"]!r}')
    for model in metadata.get("model-index") or []:
        for result in model.get("results") or [{}]:
            missing = [key for key in ("task", "dataset", "metrics") if not result.get(key)]
            if missing:
                errors.append(f'"model-index" result of {model.get("name")!r} lacks {", ".join(missing)}')
    return errors


def validate_yaml(payload):
    text = payload["content"]
    try:
        metadata = yaml.safe_load(text.split("---", 2)[1]) if text.startswith("---") else {}
    except yaml.YAMLError as error:
        return JSONResponse({"errors": [{"message": str(error)}]}, 400)
    errors = metadata_errors(metadata or {})
    if errors:
        return Response("\n".join(errors), 400, media_type="text/plain")
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
    tree_root = TREE_ROOT.match(path)
    if (
        tree_root
        and mirrored_repo(tree_root["repo"]) is not None
        and mirrored_commit(*tree_root.group("repo", "revision")) is None
    ):
        message = f"Invalid rev id: {tree_root['revision']}"
        return Response(status_code=404, headers={"x-error-code": "RevisionNotFound", "x-error-message": message})
    entry = ENTRY.match(path)
    commit = mirrored_commit(entry["repo"], entry["revision"]) if entry else None
    if commit is not None and not holds(commit, entry["path"]):
        message = f'{entry["path"]} does not exist on "{entry["revision"]}"'
        return Response(status_code=404, headers={"x-error-code": "EntryNotFound", "x-error-message": message})
    return await call_next(request)


if __name__ == "__main__":
    server.main()
