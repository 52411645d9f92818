"""Loads, by repo id from a Hub server, what tests/test_hub.py published, as a user of a shared checkpoint does:
in a fresh process without casan_hf (tests/fresh_process.py), with transformers 5 or 4.x, each check one way
in. Reads `checks.json` (a list of {"name", "kind", ...}) from the working folder and writes `results.pt`:
{name: what the check returned, or {"error": the traceback}}, so that one failure does not hide the others and
one process start serves every check."""

import json
import sys
import traceback

import torch
import transformers


def remote_module(model):
    return type(model).__module__


def auto_model(repo, auto_class, output, inputs, revision=None, code_revision=None):
    """`<auto_class>.from_pretrained(repo, trust_remote_code=True)` and its `output` on the saved inputs."""
    pinned = {name: value for name, value in (("revision", revision), ("code_revision", code_revision)) if value}
    model = getattr(transformers, auto_class).from_pretrained(repo, trust_remote_code=True, **pinned).eval()
    with torch.no_grad():
        outputs = model(**torch.load(inputs))
    with open(sys.modules[remote_module(model)].__file__) as handle:  # the code file as it was fetched
        code = handle.read()
    return {"module": remote_module(model), output: outputs[output], "code": code}


def generate(repo, sentences):
    """A translation model's tokenizer and `generate()` (beam search), both from the repo."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(repo, trust_remote_code=True)
    model = transformers.AutoModelForSeq2SeqLM.from_pretrained(repo, trust_remote_code=True).eval()
    batch = tokenizer(sentences, return_tensors="pt", padding=True)
    generated = model.generate(**batch, num_beams=2, max_new_tokens=6)
    return {"module": remote_module(model), "generated": generated}


def pipeline(repo, task, inputs, **call_kwargs):
    """`pipeline(task, model=repo, trust_remote_code=True)` on `inputs`."""
    run = transformers.pipeline(task, model=repo, trust_remote_code=True)
    result = run(inputs, **call_kwargs) if not isinstance(inputs, dict) else run(**inputs, **call_kwargs)
    return {"module": remote_module(run.model), "result": json.loads(json.dumps(result, default=float))}


def sentence_transformer(repo, sentences):
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(repo, trust_remote_code=True)
    embeddings = model.encode(sentences, convert_to_tensor=True)
    return {"module": remote_module(model[0].auto_model), "embeddings": embeddings}


def peft_adapter(repo, inputs):
    """A LoRA adapter repo whose `base_model_name_or_path` is another repo of the server."""
    from peft import AutoPeftModelForSequenceClassification

    model = AutoPeftModelForSequenceClassification.from_pretrained(repo, trust_remote_code=True).eval()
    with torch.no_grad():
        logits = model(**torch.load(inputs)).logits
    return {"module": remote_module(model.get_base_model()), "logits": logits}


def model_card(repo):
    """The card as the Hub's client reads it: metadata and eval results."""
    from huggingface_hub import ModelCard

    card = ModelCard.load(repo)
    results = [vars(result) for result in card.data.eval_results or []]
    return {"metadata": card.data.to_dict(), "eval_results": results, "text": card.text}


CHECKS = {
    "auto_model": auto_model,
    "generate": generate,
    "pipeline": pipeline,
    "sentence_transformer": sentence_transformer,
    "peft_adapter": peft_adapter,
    "model_card": model_card,
}


def main():
    results = {}
    with open("checks.json") as handle:
        checks = json.load(handle)
    for check in checks:
        name, kind = check.pop("name"), check.pop("kind")
        try:
            results[name] = CHECKS[kind](**check)
        except Exception:
            results[name] = {"error": traceback.format_exc()}
        print(name, "error" if "error" in results[name] else "ok", flush=True)
    torch.save(results, "results.pt")
    print("transformers", transformers.__version__)


if __name__ == "__main__":
    main()
