"""Conversations: everything kept between a conversation's requests, owned by one
:class:`~middleware.conversations.state.ConversationState`; the pool of them; and
:class:`~middleware.conversations.front.Conversations`, what the proxy and the SDK
integrations do with them (a request in, an answer back, a conversation ended)."""
