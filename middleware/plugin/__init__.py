"""The plugin layer: hook specifications, the ``@hookimpl`` marker, the values plugins
return, and the typed host that runs them."""
