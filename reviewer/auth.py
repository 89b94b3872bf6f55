"""Login with throttling: repeated failures lock a username and a client address for a while."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse


def _keys(request: HttpRequest) -> list[str]:
    username = request.POST.get("username", "").strip().lower()[:150]
    address = request.META.get("REMOTE_ADDR", "")
    # Hashed: the cache never holds what someone typed as a username.
    return [
        "login-fail:user:" + hashlib.sha256(username.encode()).hexdigest(),
        "login-fail:addr:" + hashlib.sha256(address.encode()).hexdigest(),
    ]


def login_blocked(request: HttpRequest) -> bool:
    """True when the username or the address has failed too often in the window."""
    counts = cache.get_many(_keys(request))
    return any(n >= settings.LOGIN_MAX_FAILURES for n in counts.values())


def login_failed(request: HttpRequest) -> None:
    """Count one failure against the username and the address."""
    for key in _keys(request):
        cache.add(key, 0, settings.LOGIN_FAILURE_WINDOW_SECONDS)
        try:
            cache.incr(key)
        except ValueError:  # expired between add and incr
            cache.set(key, 1, settings.LOGIN_FAILURE_WINDOW_SECONDS)


class ThrottledLoginView(auth_views.LoginView):
    """Django's login view, refusing further tries once the failure limit is reached."""

    def post(self, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        if login_blocked(request):
            form = AuthenticationForm(request, data=None)
            minutes = settings.LOGIN_FAILURE_WINDOW_SECONDS // 60
            form.errors["__all__"] = form.error_class(
                [f"Too many failed log-ins. Try again in {minutes} minutes."]
            )
            return self.render_to_response(self.get_context_data(form=form), status=429)
        return super().post(request, *args, **kwargs)

    def get_context_data(self, **kwargs: object) -> dict[str, object]:
        # Django's login view names the site after the request's host; ours has its name.
        return {**super().get_context_data(**kwargs), "site_name": settings.SITE_NAME}

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        login_failed(self.request)
        return super().form_invalid(form)
