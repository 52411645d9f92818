"""The API reference's Griffe extension (mkdocs.yml, mkdocstrings' `extensions`). The reference is read by runtime
inspection, which gives an attribute the docstring of its value's type: `base_model_prefix = "bert"` would read as
`str`'s docstring, `family = Family(...)` as `Family`'s. Such a docstring is dropped, so that an attribute without
its own shows under `show_if_no_docstring: false` as what it is: undocumented, and left out."""

from griffe import Extension, ObjectNode


class ValueTypeDocstrings(Extension):
    """Drops an inspected attribute's docstring when it is its value's type's, not the attribute's own."""

    def on_attribute_instance(self, *, node, attr, agent, **kwargs):
        if isinstance(node, ObjectNode) and attr.docstring is not None and node.obj.__doc__ == type(node.obj).__doc__:
            attr.docstring = None
