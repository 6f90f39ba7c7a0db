"""Model presets: the parameter count Ψ of models people train, each with its source.

The counts are of every parameter the optimizer holds (ZeRO shards all of them): for a mixture of
experts that is every expert, not the parameters active per token. Where the publisher gives the
architecture (``config.json``), the count is that architecture's (embeddings, attention with
grouped-query K/V, gated MLP, norms; untied output head), which is the count the publisher
reports; otherwise the paper's stated total.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from zerocalc.errors import UnknownNameError


@dataclass(frozen=True)
class ModelPreset:
    """One model: its name, Ψ (parameters held by the optimizer) and where the number comes from."""

    name: str
    title: str
    psi: int
    source: str
    #: Parameters used per token, for a mixture of experts (what ZeRO does not shard by); else None.
    active_psi: int | None = None
    #: The published architecture the count follows from, where there is one.
    config: dict[str, int] | None = None


MODELS: Final[dict[str, ModelPreset]] = {m.name: m for m in (
    ModelPreset(
        "llama-3-8b", "Llama 3 8B", 8_030_261_248,
        "Meta, meta-llama/Meta-Llama-3-8B config.json (32 layers, hidden 4096, MLP 14336, 32 heads, "
        "8 KV heads, vocabulary 128256, untied head); The Llama 3 Herd of Models, arXiv 2407.21783, Table 3",
        config={"layers": 32, "hidden": 4096, "ffn": 14336, "heads": 32, "kv_heads": 8, "vocab": 128256}),
    ModelPreset(
        "llama-3-70b", "Llama 3 70B", 70_553_706_496,
        "Meta, meta-llama/Meta-Llama-3-70B config.json (80 layers, hidden 8192, MLP 28672, 64 heads, "
        "8 KV heads, vocabulary 128256); arXiv 2407.21783, Table 3",
        config={"layers": 80, "hidden": 8192, "ffn": 28672, "heads": 64, "kv_heads": 8, "vocab": 128256}),
    ModelPreset(
        "llama-3.1-405b", "Llama 3.1 405B", 405_853_388_800,
        "Meta, meta-llama/Llama-3.1-405B config.json (126 layers, hidden 16384, MLP 53248, 128 heads, "
        "8 KV heads, vocabulary 128256); arXiv 2407.21783, Table 3",
        config={"layers": 126, "hidden": 16384, "ffn": 53248, "heads": 128, "kv_heads": 8, "vocab": 128256}),
    ModelPreset(
        "gpt-3-175b", "GPT-3 175B", 175_000_000_000,
        "Brown et al., Language Models are Few-Shot Learners, arXiv 2005.14165, Table 2.1 (175.0B; "
        "96 layers, d_model 12288)"),
    ModelPreset(
        "mixtral-8x7b", "Mixtral 8x7B", 46_702_792_704,
        "Mistral AI, mistralai/Mixtral-8x7B-v0.1 config.json (32 layers, hidden 4096, MLP 14336, 8 experts "
        "(2 per token), 32 heads, 8 KV heads, vocabulary 32000); Jiang et al., Mixtral of Experts, "
        "arXiv 2401.04088 (46.7B total, 12.9B active)",
        active_psi=12_900_000_000,
        config={"layers": 32, "hidden": 4096, "ffn": 14336, "heads": 32, "kv_heads": 8, "vocab": 32000,
                "experts": 8}),
    ModelPreset(
        "deepseek-v3", "DeepSeek-V3", 671_000_000_000,
        "DeepSeek-AI, DeepSeek-V3 Technical Report, arXiv 2412.19437, abstract and §2 (671B total, 37B "
        "activated per token; the 14B multi-token-prediction module not counted)",
        active_psi=37_000_000_000),
)}

#: Other spellings people use, → preset name.
ALIASES: Final[dict[str, str]] = {
    "llama3-8b": "llama-3-8b", "llama-3.1-8b": "llama-3-8b", "llama3-70b": "llama-3-70b",
    "llama-3.1-70b": "llama-3-70b", "llama-3-405b": "llama-3.1-405b", "llama3-405b": "llama-3.1-405b",
    "gpt3": "gpt-3-175b", "gpt-3": "gpt-3-175b", "mixtral": "mixtral-8x7b", "deepseekv3": "deepseek-v3",
}


def get_model(name: str) -> ModelPreset:
    """The preset called ``name`` (case-insensitive, or one of :data:`ALIASES`)."""
    key = str(name).strip().lower().replace("_", "-")
    key = ALIASES.get(key, key)
    try:
        return MODELS[key]
    except KeyError:
        raise UnknownNameError("model", str(name), tuple(MODELS)) from None
