"""The explorer's Gradio page: the inputs, the views of `views.page`, and the layer and head choices.

A submission runs the models once and keeps their `Exploration`s in the page's state; choosing a layer or a
head redraws the attention maps from that state. A checkpoint or text the page cannot show leaves a message in
the status line and the app serving. The local explorer takes any checkpoint typed in; a Space's page
(`fixed_checkpoints`) runs only the models it was written for: its checkpoint boxes only show them, and a
submission never reads a checkpoint name from the visitor.
"""

import gradio as gr

from ..inspection import MAX_TOKENS
from .views import ModelCache, attention_views, page, submit


TITLE = "CASAN explorer"
DEFAULT_TEXT = "The film was gripping, funny and not at all dull!"
INTRO = f"""# {TITLE}
What context-aware self-attention does on one text: the head's prediction, the query and key gates λ_Q and λ_K
of every layer (grey: a layer without context), the attention of a chosen layer and head, and the pooling hops
where the head pools with attention. A checkpoint is a folder or a Hub id: a CASAN model of any family and head,
or a plain BERT, RoBERTa, XLM-RoBERTa or ELECTRA to compare with. Texts are cut to {{max_tokens}} tokens, the
most the maps keep readable. Hover over a cell for its value."""
VIEWS = ("status", "prediction", "gates", "attention", "hops")


def choices(count):
    return [str(index) for index in range(count)]


def build_app(
    model="", compare="", text=DEFAULT_TEXT, pair="", max_tokens=MAX_TOKENS, cache=None, fixed_checkpoints=False
):
    """The Blocks of the explorer, its boxes filled with `model`, `compare`, `text` and `pair`. `cache` (a
    `ModelCache`) may hold models loaded already, so the first submission does not load them again.
    `fixed_checkpoints` (a Space): `model` and `compare` are the only checkpoints it runs, shown, not asked for."""
    cache = cache or ModelCache()

    def on_submit(*values):
        model_name, compare_name, text, pair, layer, head = (model, compare, *values) if fixed_checkpoints else values
        try:
            explorations = submit(cache, model_name, compare_name, text, pair, max_tokens)
        except ValueError as error:
            return [[], f"**Cannot run:** {error}", "", "", "", "", gr.Radio(), gr.Radio()]
        first = explorations[0]
        layer = min(int(layer), first.num_layers - 1) if layer else first.num_layers - 1
        head = min(int(head), first.num_heads - 1) if head else 0
        views = page(explorations, layer, head)
        return [
            explorations,
            *(views[name] for name in VIEWS),
            gr.Radio(choices(first.num_layers), value=str(layer)),
            gr.Radio(choices(first.num_heads), value=str(head)),
        ]

    def on_switch(explorations, layer, head):
        if not explorations or layer is None or head is None:
            return ""
        return attention_views(explorations, int(layer), int(head))

    with gr.Blocks(title=TITLE, analytics_enabled=False) as app:
        gr.Markdown(INTRO.format(max_tokens=max_tokens))
        with gr.Row():
            editable = not fixed_checkpoints
            model_box = gr.Textbox(
                model,
                label="Checkpoint (folder or Hub id)" if editable else "Checkpoint (this Space's)",
                elem_id="model",
                interactive=editable,
            )
            compare_box = gr.Textbox(
                compare,
                label="Compare with (optional, e.g. its --baseline twin)" if editable else "Compared with",
                elem_id="compare",
                interactive=editable,
            )
        text_box = gr.Textbox(text, label="Text", lines=2, elem_id="text")
        pair_box = gr.Textbox(pair, label="Text pair (optional; the context for question answering)", elem_id="pair")
        run = gr.Button("Run", variant="primary", elem_id="run")
        state = gr.State([])
        status = gr.Markdown(elem_id="status")
        gr.Markdown("## Prediction")
        prediction = gr.HTML(elem_id="prediction")
        gr.Markdown("## Gates")
        gates = gr.HTML(elem_id="gates")
        gr.Markdown("## Attention")
        with gr.Row():
            layer = gr.Radio([], label="Layer", elem_id="layer")
            head = gr.Radio([], label="Head", elem_id="head")
        attention = gr.HTML(elem_id="attention")
        gr.Markdown("## Pooling hops")
        hops = gr.HTML(elem_id="hops")

        inputs = (
            [text_box, pair_box, layer, head]
            if fixed_checkpoints
            else [model_box, compare_box, text_box, pair_box, layer, head]
        )
        outputs = [state, status, prediction, gates, attention, hops, layer, head]
        # One listener for both triggers: its queue runs one submission at a time, and the models are not
        # thread-safe (inspect_attention switches their attention implementation for the call).
        gr.on([run.click, text_box.submit], on_submit, inputs, outputs, concurrency_limit=1)
        # A layer and a head picked in quick succession: the second click arrives while the first redraw runs,
        # and is drawn after it with the latest choices ("once", Gradio's default, would drop it).
        gr.on([layer.input, head.input], on_switch, [state, layer, head], attention, trigger_mode="always_last")
    return app


__all__ = ["DEFAULT_TEXT", "build_app"]
