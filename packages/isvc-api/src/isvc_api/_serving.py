"""The load an order must carry: a class's serving target, its defaults by endpoint type, and their sources.

A plan is sized to serve, not only to start (issue 42): the KV budget of every launch holds `requests`
requests of `typical` tokens at once and one request of `longest` tokens, by the runtime's own accounting
(`_memory.fit_launch`); the runtime runs no more sequences at once than that budget holds at the typical length.

The defaults come from published request lengths of real traffic (module/docs/FAQ.md, "How does the serving
target size a plan?"):

    AZ23   Azure LLM inference trace 2023 (Azure/AzurePublicDataset @b469a11, data/AzureLLMInferenceTrace_conv.csv
           and _code.csv; the ISCA 2024 Splitwise paper's traces). Prompt and answer together, conversation
           (19,366 requests): median 1,412, mean 1,366, 85.4 % at most 2,048, p99 4,259, the longest 14,089;
           coding (8,819): median 1,493, mean 2,076, p99 7,462, the longest 7,841; 99.99 % of both at most 8,192.
    LMSYS  LMSYS-Chat-1M (arXiv:2309.11998, Table 1): 69.5 tokens a prompt, 214.5 an answer, 2.0 turns a
           conversation: a turn that resends its history stays well below 2,048.
    BURST  BurstGPT (HPMLL/BurstGPT @e92f533, README Figure 4, ChatGPT and GPT-4 conversation logs): the median
           answer grows with the request, to about 450 tokens at 2,000 request tokens.
    BEIR   BEIR (arXiv:2104.08663, Table 1): the average document of its 18 corpora runs from 11 words (Quora)
           to 635 (TREC-NEWS), MS MARCO's passage 56 and query 6 words; a passage and a query pair stay within
           512 tokens but for the longest corpora. TEI batches 32 inputs of a client request at most
           (text-embeddings-inference router/src/main.rs, --max-client-batch-size) and 16,384 tokens a batch
           (--max-batch-tokens): 32 inputs of 512 tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ConfigDict, Field, model_validator

from isvc_api._base import Wire
from isvc_api._vocabulary import EndpointType

__all__ = ["SERVING_DEFAULTS", "Load", "ServingTarget", "serving_load"]

_TYPICAL_WITHIN_LONGEST = "typicalRequestTokens must not exceed longestRequestTokens"


@dataclass(frozen=True)
class Load:
    """What one replica serves: `requests` requests of `typical` tokens at once (prompt and answer together),
    and one request of `longest` tokens."""

    requests: int
    typical: int
    longest: int

    def within(self, context: int | None) -> Load:
        """The load as a model whose own context is `context` tokens can carry it (no request is longer)."""
        if not context:
            return self
        return Load(self.requests, min(self.typical, context), min(self.longest, context))

    @property
    def tokens(self) -> int:
        """Tokens of KV cache the load takes at most: its requests at once, or its longest request."""
        return max(self.requests * self.typical, self.longest)

    def words(self) -> str:
        return (
            f"{self.requests} requests of {self.typical:,} tokens at once and a request of up to "
            f"{self.longest:,} tokens"
        )


# AZ23, LMSYS, BURST: 2,048 tokens hold 85 % of the conversation requests and more than the mean of the coding
# ones; 8,192 all but one request in ten thousand. 16 at once is the floor (32,768 tokens of KV).
CHAT = Load(requests=16, typical=2048, longest=8192)
# BEIR, TEI: 32 inputs of 512 tokens, TEI's own defaults; documents up to 8,192 for models that read that far.
EMBEDDINGS = Load(requests=32, typical=512, longest=8192)
SERVING_DEFAULTS: dict[EndpointType, Load] = {
    EndpointType.CHAT: CHAT,
    EndpointType.EMBEDDINGS: EMBEDDINGS,
    EndpointType.RERANK: EMBEDDINGS,  # a query and a passage: BEIR as above
}


class ServingTarget(Wire):
    """The load one replica of an order must carry; the plan's KV budget holds it (issue 42)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": (
                        "!has(self.typicalRequestTokens) || !has(self.longestRequestTokens) || "
                        "self.typicalRequestTokens <= self.longestRequestTokens"
                    ),
                    "message": _TYPICAL_WITHIN_LONGEST,
                }
            ]
        }
    )

    concurrent_requests: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="Requests of typicalRequestTokens one replica serves at once, none waiting for KV cache; "
        "absent: the default of the order's endpoint type (Chat 16, Embeddings and Rerank 32).",
    )
    typical_request_tokens: int | None = Field(
        default=None,
        ge=16,
        le=1048576,
        description="Tokens of a typical request, prompt and answer together; absent: the default of the "
        "order's endpoint type (Chat 2048, Embeddings and Rerank 512).",
    )
    longest_request_tokens: int | None = Field(
        default=None,
        ge=16,
        le=1048576,
        description="The longest request, prompt and answer together, one replica accepts (at most the model's "
        "own context); absent: the default of the order's endpoint type (8192).",
    )

    @model_validator(mode="after")
    def _typical_within_longest(self) -> ServingTarget:
        typical, longest = self.typical_request_tokens, self.longest_request_tokens
        if typical is not None and longest is not None and typical > longest:
            raise ValueError(_TYPICAL_WITHIN_LONGEST)
        return self

    @classmethod
    def of(cls, load: Load) -> ServingTarget:
        """The target stating every field of `load`."""
        return cls(
            concurrent_requests=load.requests,
            typical_request_tokens=load.typical,
            longest_request_tokens=load.longest,
        )


def serving_load(target: ServingTarget | None, endpoint_type: EndpointType | None) -> Load:
    """The load a target asks of an order of `endpoint_type` (None: Chat), each field it leaves out taken from
    that type's default; a typical request longer than the default longest lengthens the longest."""
    default = SERVING_DEFAULTS[endpoint_type or EndpointType.CHAT]
    if target is None:
        return default
    typical = target.typical_request_tokens
    longest = target.longest_request_tokens
    if typical is None:
        typical = min(default.typical, longest or default.typical)
    if longest is None:
        longest = max(default.longest, typical)
    return Load(target.concurrent_requests or default.requests, typical, longest)
