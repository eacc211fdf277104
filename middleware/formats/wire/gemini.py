"""Google Gemini ``generateContent``: ``contents[].parts[]``, a model content's
``functionCall`` parts answered by the ``functionResponse`` parts of the content after it.

Ids are optional on both sides (the Developer API often sends calls without one, and
Gemini CLI answers those with ids of its own), so a response answers a call of its turn by
id when both carry the same one, else by name and position: the k-th response named ``N``
answers the k-th call named ``N`` not answered by id, unless the response carries an id
and a call of its turn does (that response answers nothing). :func:`.gemini_turns.link`
gives the view ids saying so; they are never written to the wire.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from middleware.cache.messages import MessageMemo
from middleware.formats.base import Codec
from middleware.formats.declarations import (
    AnswerCall,
    ErrorKind,
    Provider,
    ResultPlacement,
    Route,
    ToolSpec,
    UsageCounts,
    Violation,
)
from middleware.formats.openings import CALL_IDS, normal
from middleware.formats.text_protocol import TextProtocol
from middleware.formats.values import count_of, string_of
from middleware.formats.wire.gemini_parts import content_to_node, node_to_content
from middleware.formats.wire.gemini_turns import (
    POSITION_PREFIX,
    link,
    view_id,
    violations,
    wire_id,
)
from middleware.view import Conversation, Node, ToolCall, ToolResult

#: The model methods whose body holds a history: whether the answer is billed, and
#: whether it is streamed by its path.
_METHODS = (
    ("generateContent", True, False),
    ("streamGenerateContent", True, True),
    ("countTokens", False, False),
)


class GoogleAI(Provider):
    """Google's Gemini API (``generativelanguage.googleapis.com``)."""

    name: ClassVar[str] = "gemini"
    default_upstream: ClassVar[str] = "https://generativelanguage.googleapis.com"
    #: Its API versions (google-genai's ``api_version``; ``v1beta1`` is Vertex AI's) and
    #: the SDKs' file uploads (``/upload/v1beta/files``).
    api_prefixes: ClassVar[tuple[str, ...]] = (
        "/v1beta/",
        "/v1/",
        "/v1beta1/",
        "/v1alpha/",
        "/upload/",
    )
    #: The proxy's situations -> Google's HTTP status names (``google.rpc.Code``).
    STATUSES: ClassVar[dict[str, tuple[int, str]]] = {
        "too_large": (413, "INVALID_ARGUMENT"),
        "not_processed": (502, "INTERNAL"),
        "upstream_unreachable": (502, "UNAVAILABLE"),
        "not_found": (404, "NOT_FOUND"),
        "forbidden": (403, "PERMISSION_DENIED"),
        "request_timeout": (408, "DEADLINE_EXCEEDED"),
        "overloaded": (503, "UNAVAILABLE"),
        "bad_request": (400, "INVALID_ARGUMENT"),
        "not_json": (415, "INVALID_ARGUMENT"),
    }

    def error_document(self, kind: ErrorKind, message: str) -> dict[str, Any]:
        code, status = self.STATUSES[kind]
        return {"error": {"code": code, "message": message, "status": status}}

    def claims(self, headers: Mapping[str, str], query: Mapping[str, str]) -> bool:
        """Its key, as a header or as the ``key`` query parameter."""
        return "x-goog-api-key" in headers or "key" in query


GOOGLE = GoogleAI()


class GeminiCodec(Codec):
    name: ClassVar[str] = "gemini"
    provider: ClassVar[Provider] = GOOGLE
    history_key: ClassVar[str] = "contents"
    #: An explicit cache (``cachedContents/...``) holds turns the body goes on from.
    stored_state_keys: ClassVar[tuple[str, ...]] = ("cachedContent",)
    #: The Developer API's model paths, and Vertex AI's (for a proxy whose
    #: ``proxy.upstreams.gemini`` is a Vertex endpoint).
    proxy_routes: ClassVar[tuple[Route, ...]] = tuple(
        Route(f"{models}/{{model}}:{method}", billed, streamed)
        for models in (
            "/v1beta/models",
            "/v1/models",
            "/v1/projects/{project}/locations/{location}/publishers/google/models",
            "/v1beta1/projects/{project}/locations/{location}/publishers/google/models",
        )
        for method, billed, streamed in _METHODS
    )
    client_routes: ClassVar[tuple[Route, ...]] = tuple(
        Route(f":{method}", billed, streamed) for method, billed, streamed in _METHODS
    )
    results_share_message: ClassVar[bool] = True
    result_placement: ClassVar[ResultPlacement] = ResultPlacement.NEXT_MESSAGE

    #: Part fields only Gemini has.
    PARTS: ClassVar[frozenset[str]] = frozenset(
        {
            "functionCall",
            "functionResponse",
            "inlineData",
            "fileData",
            "thoughtSignature",
            "executableCode",
            "codeExecutionResult",
        }
    )

    def signals(self, message: Mapping[str, Any]) -> list[tuple[str, bool]]:
        """``parts`` instead of ``content``, the ``model`` role, its part fields."""
        out: list[tuple[str, bool]] = []
        if string_of(message.get("role")) == "model":
            out.append(("role 'model'", True))
        parts = message.get("parts")
        if isinstance(parts, list) and "content" not in message:
            out.append(("'parts' field", True))
            out += [
                (f"{key!r} part", True)
                for part in parts
                if isinstance(part, dict)
                for key in part
                if key in self.PARTS
            ]
        return out

    # -- reading ---------------------------------------------------------------------------

    def parse(
        self,
        messages: Sequence[Any],
        rule: TextProtocol | None = None,
        memo: MessageMemo | None = None,
    ) -> Conversation:
        conversation = super().parse(messages, rule, memo)
        conversation.nodes = link(conversation.nodes)
        return conversation

    def parse_message(self, message: dict[str, Any], index: int) -> Node:
        return content_to_node(message, index)

    def message_content(self, message: dict[str, Any]) -> str | list[Any] | None:
        """The text of a content made only of text parts."""
        parts = message.get("parts")
        if not isinstance(parts, list) or not parts:
            return None
        texts = [part.get("text") for part in parts if isinstance(part, dict)]
        if len(texts) != len(parts) or not all(isinstance(t, str) for t in texts):
            return None
        return "\n".join(texts)  # type: ignore[arg-type]

    # -- writing ---------------------------------------------------------------------------

    def render_node(self, node: Node) -> Any:
        return node_to_content(node)

    def result_node(self, results: Sequence[ToolResult]) -> Node:
        return Node("user", tuple(results))

    def user_message(self, text: str) -> dict[str, Any]:
        return {"role": "user", "parts": [{"text": text}]}

    def synthetic_result(self, call: ToolCall, text: str) -> ToolResult:
        """``{"error": text}``, named after the call (and carrying its id, if it has one)."""
        return ToolResult(call_id=call.id, content=text, is_error=True, tool_name=call.name)

    # -- the provider's rules ------------------------------------------------------------

    def violations(self, messages: Sequence[dict[str, Any]]) -> list[Violation]:
        """A model content with ``functionCall`` parts is followed right away by a content
        with exactly as many ``functionResponse`` parts (answering its calls' ids, where
        both carry one); a content with ``functionResponse`` parts comes right after such
        a model content; calls are named."""
        return violations(messages)

    # -- answers (an integration answering some calls itself) ------------------------------

    def tool_definition(self, tool: ToolSpec) -> dict[str, Any]:
        return {
            "functionDeclarations": [
                {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
            ]
        }

    def declared_tool_names(self, tool: Mapping[str, Any]) -> list[Any]:
        """Every function a ``Tool`` declares (Gemini CLI declares all of its in one)."""
        declarations = tool.get("functionDeclarations")
        return (
            [d.get("name") for d in declarations if isinstance(d, Mapping)]
            if isinstance(declarations, list)
            else []
        )

    def answer_calls(self, answer: Mapping[str, Any]) -> list[AnswerCall]:
        """The first candidate's calls (an id-less call is named by its position)."""
        out = []
        for k, part in enumerate(_answer_parts(answer)):
            call = part.get("functionCall")
            if isinstance(call, dict):
                uid = call.get("id")
                out.append(
                    AnswerCall(
                        view_id(uid)
                        if isinstance(uid, str) and uid
                        else f"{POSITION_PREFIX}answer:{k}",
                        call.get("name") or "",
                        call.get("args") or {},
                    )
                )
        return out

    def answer_without_calls(self, answer: Mapping[str, Any], name: str) -> dict[str, Any]:
        candidates = list(answer["candidates"])
        content = dict(candidates[0]["content"])
        content["parts"] = [
            p
            for p in content.get("parts") or []
            if (p.get("functionCall") or {}).get("name") != name
        ]
        candidates[0] = {**candidates[0], "content": content}
        return {**answer, "candidates": candidates}

    def continued(
        self, body: Mapping[str, Any], answer: Mapping[str, Any], results: list[tuple[str, str]]
    ) -> dict[str, Any]:
        parts = _answer_parts(answer)
        calls = {call.id: call for call in self.answer_calls(answer)}
        responses = []
        for call_id, text in results:
            response: dict[str, Any] = {"name": calls[call_id].name, "response": {"output": text}}
            if (real_id := wire_id(call_id)) is not None:
                response["id"] = real_id
            responses.append({"functionResponse": response})
        return {
            **body,
            "contents": [
                *body["contents"],
                {"role": "model", "parts": parts},
                {"role": "user", "parts": responses},
            ],
        }

    def opening(self, body: Mapping[str, Any]) -> Any | None:
        """The call ids of the first reply once there is one with ids (unique to their
        conversation: Gemini CLI makes them, and rewrites the first user content, its
        session context, when a session is resumed); else the system instruction, the
        first user content and the first reply's text."""
        contents = body.get("contents")
        first_user: Any = None
        reply: list[dict[str, Any]] = []
        for content in contents if isinstance(contents, list) else []:
            if not isinstance(content, dict):
                continue
            if content.get("role") == "model":
                reply += [p for p in content.get("parts") or [] if isinstance(p, dict)]
            elif reply:
                break
            elif first_user is None:
                first_user = content.get("parts")
        ids = [
            call.get("id") for part in reply if isinstance(call := part.get("functionCall"), dict)
        ]
        if ids and all(isinstance(uid, str) and uid for uid in ids):
            return normal({CALL_IDS: ids})
        texts = [
            p["text"] for p in reply if isinstance(p.get("text"), str) and not p.get("thought")
        ]
        return normal([body.get("systemInstruction"), first_user, "".join(texts)])

    def said(self, body: Mapping[str, Any]) -> tuple[tuple[str, ...], int] | None:
        """The contents' texts (thoughts left out) and call ids, in order. Gemini CLI's
        model router sends a call id as ``NAME__ID`` where the conversation sends ``ID``:
        it is read as ``ID``."""
        contents = body.get("contents")
        said: list[str] = []
        replies = 0
        for content in contents if isinstance(contents, list) else []:
            if not isinstance(content, dict):
                continue
            role = content.get("role", "user")
            replies += role == "model"
            for part in content.get("parts") or []:
                if not isinstance(part, dict) or part.get("thought"):
                    continue
                if isinstance(text := part.get("text"), str):
                    said.append(f"{role}:{text}")
                call = part.get("functionCall")
                if isinstance(call, dict) and isinstance(uid := call.get("id"), str):
                    said.append("call:" + uid.removeprefix(f"{call.get('name')}__"))
        return tuple(said), replies

    # -- usage -----------------------------------------------------------------------------

    def usage_counts(self, usage: Mapping[str, Any]) -> UsageCounts | None:
        """``usageMetadata``: the prompt (tool-use prompt tokens with it), of which
        ``cachedContentTokenCount`` were read from the cache; thoughts bill as output."""
        if "promptTokenCount" not in usage and "candidatesTokenCount" not in usage:
            return None
        prompt = count_of(usage, "promptTokenCount") + count_of(usage, "toolUsePromptTokenCount")
        cached = min(count_of(usage, "cachedContentTokenCount"), prompt)
        output = count_of(usage, "candidatesTokenCount") + count_of(usage, "thoughtsTokenCount")
        return UsageCounts(input=prompt - cached, cache_read=cached, output=output)

    def answer_usage(self, answer: Mapping[str, Any]) -> tuple[Any, Any]:
        return answer.get("usageMetadata"), answer.get("modelVersion")

    def event_usage(self, event: Mapping[str, Any]) -> tuple[Any, Any] | None:
        """Every chunk may carry the usage so far; the last one's is the answer's."""
        if "usageMetadata" not in event:
            return None
        return event.get("usageMetadata"), event.get("modelVersion")

    def answer_id(self, answer: Mapping[str, Any]) -> Any:
        return answer.get("responseId")

    def event_id(self, event: Mapping[str, Any]) -> Any:
        """Every chunk names its response."""
        return event.get("responseId")


CODEC = GeminiCodec()


def _answer_parts(answer: Mapping[str, Any]) -> list[dict[str, Any]]:
    candidates = answer.get("candidates") or [{}]
    content = candidates[0].get("content") or {}
    return [p for p in content.get("parts") or [] if isinstance(p, dict)]
