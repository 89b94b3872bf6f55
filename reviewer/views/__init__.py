"""Every screen's views, one module per screen; `reviewer/urls.py` names them all."""
