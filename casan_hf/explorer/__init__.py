"""The explorer: a web page (Gradio) that shows what a checkpoint's context does on a text you type.

`views` holds what a submission computes and the HTML of each view, without Gradio (the unit tests run it);
`app` is the Gradio page (`build_app`); `space` writes a folder the Hub serves as a Space. Gradio is the optional
extra `casan-hf[demo]`, imported by `app` alone; `scripts/explore.py` serves the page or writes the Space.
"""
