"""The docs site's hook (mkdocs.yml, `make docs-site`): README.md is the home page, and a repository file that a page
links to outside docs/ (a model card, the notebook) is served at its repository path, so that every link of the
Markdown, which reads right in the repository, resolves on the site too. A link to a file the checkout lacks fails
the build, as mkdocs' strict mode fails one between pages."""

import posixpath
import re
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File


ROOT = Path(__file__).resolve().parents[1]
HOME = "README.md"
# A Markdown link or image whose target is a relative path (not a URL, an e-mail or an anchor of the same page).
LINK = re.compile(r"(\]\()(?![a-z]+:|#)([^)#\s]+)((?:#[^)\s]*)?\))")


def site_path(repository_path):
    """Where a repository file is served: README.md as the home page, docs/X as X, any other file at its path."""
    if repository_path == HOME:
        return "index.md"
    return repository_path.removeprefix("docs/")


def repository_path(site_file):
    """The repository path of a page or file of the site (the inverse of `site_path` for the files it serves)."""
    if site_file == "index.md":
        return HOME
    outside = Path(ROOT / site_file)
    return site_file if outside.exists() and not (ROOT / "docs" / site_file).exists() else f"docs/{site_file}"


def link_targets(markdown, source):
    """The repository paths of the relative links in `markdown`, a file at repository path `source`."""
    base = posixpath.dirname(source)
    return [posixpath.normpath(posixpath.join(base, match.group(2))) for match in LINK.finditer(markdown)]


def on_files(files, config):
    pages = [HOME] + [f"docs/{file.src_uri}" for file in files.documentation_pages()]
    served = {HOME}
    for source in pages:
        for target in link_targets((ROOT / source).read_text(encoding="utf-8"), source):
            if target.startswith("docs/") or target in served:
                continue
            if not (ROOT / target).is_file():
                raise PluginError(f"{source} links to {target}, which the repository does not hold")
            served.add(target)
    for target in sorted(served):
        files.append(File.generated(config, site_path(target), abs_src_path=str(ROOT / target)))
    return files


def on_page_markdown(markdown, page, config, files):
    """Each relative link rewritten from the page's repository path to the site's."""
    source = repository_path(page.file.src_uri)
    here = posixpath.dirname(page.file.src_uri)

    def rewrite(match):
        target = posixpath.normpath(posixpath.join(posixpath.dirname(source), match.group(2)))
        return match.group(1) + posixpath.relpath(site_path(target), here or ".") + match.group(3)

    return LINK.sub(rewrite, markdown)
