"""The Users page (admins): list users, create one with a password or an invitation link, change a role or an
e-mail address, deactivate, and reset a password (set it, or make a link where the user sets it)."""

from authlib.integrations.base_client import MismatchingStateError, OAuthError
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST
from joserfc.errors import BadSignatureError, ExpiredTokenError, InvalidClaimError, JoseError, MissingClaimError
from requests import RequestException

from simia_web.core.errors import ValidationFailed
from simia_web.core.forms import form_errors_add

from . import selectors, services
from .forms import SET_PASSWORD, PasswordSetForm, UserCreateForm, UserEditForm
from .models import User, Workspace
from .oidc import SignInRefused, oidc_client, oidc_enabled
from .permissions import role_required
from .receivers import sign_in_refused_record

PAGE_SIZE = 100
OIDC_LEEWAY_SECONDS = 60  # clock skew allowed on the ID token's exp and iat


def _link(request, user: User) -> str:
    uidb64, token = services.user_password_link(user=user)
    return request.build_absolute_uri(reverse("password_reset_confirm", args=[uidb64, token]))


def _scope(request) -> Workspace | None:
    """The workspace whose users the page manages: the admin's current one; None (every user) for a site
    administrator who has none."""
    return request.user.current_workspace


def _person(request, pk: int) -> User:
    """A user of the admin's workspace; anyone else's is not found here (a site administrator reaches everyone)."""
    person = selectors.user_in_scope(workspace=None if request.user.is_site_admin else _scope(request), pk=pk)
    if person is None:
        raise Http404("No such user in this workspace.")
    return person


def _role_in_scope(request, person: User) -> str:
    workspace = _scope(request)
    if workspace is None:
        return person.role
    role = person.memberships.filter(workspace=workspace).values_list("role", flat=True).first()
    return role or person.role


@role_required("admin")
def user_list(request):
    users = selectors.user_list(workspace=_scope(request))
    page = Paginator(users, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "accounts/user_list.html", {"page": page, "query": "", "workspace": _scope(request)})


@role_required("admin")
def user_create(request):
    form = UserCreateForm(request.POST or None)
    workspace = _scope(request)
    workspaces = [workspace.slug] if workspace is not None else None
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            if data["how"] == SET_PASSWORD:
                user = services.user_create(
                    username=data["username"],
                    role=data["role"],
                    email=data["email"],
                    password=data["password1"],
                    actor=request.user,
                    workspaces=workspaces,
                )
            else:
                user = services.user_invite(
                    username=data["username"],
                    role=data["role"],
                    email=data["email"],
                    actor=request.user,
                    workspaces=workspaces,
                )
        except ValidationFailed as exc:
            form_errors_add(form, _on_password(exc))
        else:
            if data["how"] == SET_PASSWORD:
                messages.success(request, f"User {user.username} created: they can log in with the password set.")
                return redirect("user-list")
            return render(
                request, "accounts/user_link.html", {"person": user, "link": _link(request, user), "new": True}
            )
    return render(request, "accounts/user_form.html", {"form": form}, status=400 if form.errors else 200)


def _on_password(exc: ValidationFailed) -> ValidationFailed:
    """The service's refusal of the password is about the form's first password field."""
    if "password" not in exc.errors:
        return exc
    return ValidationFailed.of({"password1" if name == "password" else name: said for name, said in exc.errors.items()})


@role_required("admin")
def user_edit(request, pk: int):
    person = _person(request, pk)
    initial = {"email": person.email, "role": _role_in_scope(request, person), "is_active": person.is_active}
    form = UserEditForm(request.POST if request.method == "POST" else None, initial=initial, prefix="user")
    if request.method == "POST" and form.is_valid():
        try:
            services.user_update(user=person, actor=request.user, workspace=_scope(request), **form.cleaned_data)
        except ValidationFailed as exc:
            form_errors_add(form, exc)
        else:
            messages.success(request, f"User {person.username} saved.")
            return redirect("user-edit", pk=person.pk)
    context = {"person": person, "form": form, "password_form": PasswordSetForm(prefix="password")}
    return render(request, "accounts/user_edit.html", context, status=400 if form.errors else 200)


@role_required("admin")
@require_POST
def user_password(request, pk: int):
    """Reset a password: set a new one, or (`link`) make a link where the user sets it."""
    person = _person(request, pk)
    if request.POST.get("link"):
        return render(request, "accounts/user_link.html", {"person": person, "link": _link(request, person)})
    password_form = PasswordSetForm(request.POST, prefix="password")
    if password_form.is_valid():
        try:
            services.user_password_set(
                user=person, password=password_form.cleaned_data["password1"], actor=request.user
            )
        except ValidationFailed as exc:
            form_errors_add(password_form, _on_password(exc))
        else:
            messages.success(request, f"The password of {person.username} was changed.")
            return redirect("user-edit", pk=person.pk)
    initial = {"email": person.email, "role": _role_in_scope(request, person), "is_active": person.is_active}
    context = {"person": person, "form": UserEditForm(initial=initial, prefix="user"), "password_form": password_form}
    return render(request, "accounts/user_edit.html", context, status=400)


# -- signing in: the login page, the OpenID Connect flow, choosing a workspace ----------------------------------------


class LoginView(auth_views.LoginView):
    """Django's login page, with the single sign-on button when it is configured; with SIMIA_PASSWORD_LOGIN=0 a
    password signs in site administrators only."""

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context.update(oidc_enabled=oidc_enabled(), password_login=settings.SIMIA_PASSWORD_LOGIN)
        return context

    def form_valid(self, form):
        user = form.get_user()
        if not settings.SIMIA_PASSWORD_LOGIN and not user.is_site_admin:
            sign_in_refused_record(
                request=self.request, method="password", reason="password_login_off", username=user.username
            )
            form.add_error(None, "Password login is turned off here: sign in with your company account.")
            return self.form_invalid(form)
        return super().form_valid(form)


def _refused(request, exc: SignInRefused, *, username: str = "", detail: str = ""):
    sign_in_refused_record(request=request, method="oidc", reason=exc.reason, username=username, detail=detail)
    return render(
        request,
        "accounts/sign_in_refused.html",
        {"message": exc.message, "reason": exc.reason},
        status=403 if exc.reason in ("no_mapped_group", "inactive", "username_taken") else 400,
    )


def oidc_login(request):
    """Start the OpenID Connect flow: to the provider, which sends the browser back to `oidc_callback`."""
    if not oidc_enabled():
        raise Http404("Single sign-on is not configured.")
    next_url = request.GET.get("next", "")
    if url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        request.session["oidc_next"] = next_url
    try:
        return oidc_client().authorize_redirect(request, request.build_absolute_uri(reverse("oidc-callback")))
    except (OSError, RequestException, OAuthError, ValueError) as exc:
        return _refused(
            request,
            SignInRefused("provider_unreachable", "The identity provider cannot be reached: try again."),
            detail=str(exc),
        )


# What each refusal of the provider's answer means, for the person and for the log.
_TOKEN_REFUSALS: list[tuple[type[Exception], str, str]] = [
    (
        MismatchingStateError,
        "wrong_state",
        "This sign-in answer does not belong to the sign-in you started (its "
        "state differs): start again from the login page.",
    ),
    (
        InvalidClaimError,
        "invalid_claim",
        "The identity provider's ID token was not for this site, or not from the "
        "expected issuer, or not for this sign-in (nonce): sign-in refused.",
    ),
    (MissingClaimError, "missing_claim", "The identity provider's ID token lacks a required claim: sign-in refused."),
    (ExpiredTokenError, "expired_token", "The identity provider's ID token has expired: start again."),
    (
        BadSignatureError,
        "bad_signature",
        "The identity provider's ID token signature could not be verified: sign-in refused.",
    ),
]


def _token_refusal(exc: Exception) -> SignInRefused:
    for kind, reason, message in _TOKEN_REFUSALS:
        if isinstance(exc, kind):
            claim = getattr(exc, "claim", "")
            if claim == "azp":  # another audience besides ours, and no authorized party naming us
                reason, message = "wrong_aud", _TOKEN_REFUSALS[0 + 1][2]
            elif reason == "invalid_claim":
                reason = f"wrong_{claim or 'claim'}"  # wrong_iss, wrong_aud, wrong_nonce
            return SignInRefused(reason, message)
    if isinstance(exc, JoseError):
        return SignInRefused(
            "invalid_token", "The identity provider's ID token could not be verified: sign-in refused."
        )
    return SignInRefused("provider_error", "The identity provider refused or failed the sign-in: start again.")


def oidc_callback(request):
    """Where the provider sends the browser back: check the answer (state, then the ID token's signature, issuer,
    audience, expiry and nonce), then sign the user in with the memberships their groups give."""
    if not oidc_enabled():
        raise Http404("Single sign-on is not configured.")
    try:
        token = oidc_client().authorize_access_token(request, leeway=OIDC_LEEWAY_SECONDS)
        claims = token.get("userinfo")
        if not claims:
            raise SignInRefused("no_id_token", "The identity provider sent no ID token: sign-in refused.")
        user = services.oidc_sign_in(issuer=settings.SIMIA_OIDC_ISSUER, claims=dict(claims))
    except SignInRefused as exc:
        return _refused(request, exc)
    except (OAuthError, JoseError, RequestException, OSError, ValueError) as exc:
        return _refused(request, _token_refusal(exc), detail=f"{type(exc).__name__}: {exc}")
    next_url = request.session.pop("oidc_next", "") or settings.LOGIN_REDIRECT_URL
    request.sign_in_method = "oidc"
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    return redirect(next_url)


@login_required
@require_POST
def workspace_switch(request):
    """Make the chosen workspace the user's current one (remembered), then back to where they were."""
    workspace = Workspace.objects.filter(slug=request.POST.get("workspace", "")).first()
    if workspace is None:
        raise Http404("No such workspace.")
    try:
        services.workspace_switch(user=request.user, workspace=workspace)
    except ValidationFailed as exc:
        raise Http404("You are not a member of this workspace.") from exc
    messages.success(request, f"Now working in {workspace.name}.")
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        back = "/"
    return redirect(back)
