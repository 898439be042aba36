"""Errors a person can act on. Each message says what went wrong and what to do next.

The CLI prints `str(err)` as one line on stderr and exits 2; the app shows it on the page.
"""


class AttnVizError(Exception):
    """Base class: bad input or an environment problem, never a bug in our code."""


class ModelLoadError(AttnVizError):
    """The model spec could not be resolved or its weights could not be loaded."""


class UnsupportedArchitectureError(ModelLoadError):
    """The checkpoint is not a BERT encoder (e.g. GPT-2, RoBERTa with its own config, T5)."""


class DeviceError(AttnVizError):
    """The requested device or dtype is not available here."""


class InputError(AttnVizError):
    """The text (or another user input) cannot be encoded as given."""


class MaskError(AttnVizError):
    """A mask has the wrong shape, dtype or values for this input."""


class SettingsError(AttnVizError):
    """An ATTENTION_LENS_* environment variable holds a value that cannot be used."""


class BudgetError(InputError):
    """A request would go over one of the operator's budgets (models.settings); the message names the budget."""


class ModelNotAllowedError(ModelLoadError):
    """A model outside the operator's ATTENTION_LENS_MODELS, or a custom one on a shared server without a list."""


def one_line(err: BaseException, limit: int = 300, with_type: bool = False) -> str:
    """Return an exception's text on one line, cut to `limit` characters: what the CLI prints and the app shows.

    with_type: lead with the exception's class name (for errors raised by code that is not ours: a user's module).
    An exception with no text is named by its class.
    """
    text = " ".join(str(err).split())
    if with_type or not text:
        text = f"{type(err).__name__}: {text}" if text else type(err).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
