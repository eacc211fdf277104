"""Requests from the wire, each mapped to its conversation and cleaned by that
conversation's pipeline: what the proxy and the SDK integrations share."""
