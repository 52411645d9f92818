"""Training CASAN with `Trainer`: the context's own learning rate, freezing and unfreezing (`trainer`), the
gates watched at each evaluation (`gates`), and a checkpoint saved when the cluster preempts the run
(`preemption`)."""

from .gates import GateMonitor, gate_means
from .preemption import PREEMPTED_EXIT_CODE, PREEMPTION_SIGNALS, Preempted, PreemptionAndResume
from .trainer import (
    CasanSeq2SeqTrainer,
    CasanTrainer,
    CasanTrainingArguments,
    Unfreeze,
    card_hyperparameters,
    check_training_options,
    finish_run,
    freeze_pretrained,
    gate_monitor_for,
    give_context_its_learning_rate,
    has_context,
    is_new_parameter,
    train_and_save,
)


__all__ = [
    "CasanSeq2SeqTrainer",
    "CasanTrainer",
    "CasanTrainingArguments",
    "GateMonitor",
    "PREEMPTED_EXIT_CODE",
    "PREEMPTION_SIGNALS",
    "Preempted",
    "PreemptionAndResume",
    "Unfreeze",
    "card_hyperparameters",
    "check_training_options",
    "finish_run",
    "freeze_pretrained",
    "gate_means",
    "gate_monitor_for",
    "give_context_its_learning_rate",
    "has_context",
    "is_new_parameter",
    "train_and_save",
]
