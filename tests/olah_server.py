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

Nothing of the project, of olah's package or of the clients is changed; the tests load through unmodified
`huggingface_hub` and `transformers`.
"""

import os
import re

import git
from fastapi.responses import Response
from olah import server


# /<org>/<name>/resolve/<revision>/<file> and /api/models/<org>/<name>/tree/<revision>/<path>
ENTRY = re.compile(r"^/(?:api/models/)?(?P<repo>[^/]+/[^/]+)/(?:resolve|tree)/(?P<revision>[^/]+)/(?P<path>.+)$")
MODEL_INFO = re.compile(r"^/api/models/(?P<repo>[^/]+/[^/]+)$")


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


@server.app.middleware("http")
async def answer_as_the_hub(request, call_next):
    path = request.scope["path"]
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
