"""The Users page (admins): list users, create one with a password or an invitation link, change a role or an
e-mail address, deactivate, and reset a password (set it, or make a link where the user sets it)."""

from django.contrib import messages
from django.core.exceptions import ValidationError
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from simia_web.core.forms import form_errors_add

from . import selectors, services
from .forms import SET_PASSWORD, PasswordSetForm, UserCreateForm, UserEditForm
from .models import User
from .permissions import role_required

PAGE_SIZE = 100


def _link(request, user: User) -> str:
    uidb64, token = services.user_password_link(user=user)
    return request.build_absolute_uri(reverse("password_reset_confirm", args=[uidb64, token]))


@role_required("admin")
def user_list(request):
    page = Paginator(selectors.user_list(), PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "accounts/user_list.html", {"page": page, "query": ""})


@role_required("admin")
def user_create(request):
    form = UserCreateForm(request.POST or None)
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
                )
            else:
                user = services.user_invite(
                    username=data["username"], role=data["role"], email=data["email"], actor=request.user
                )
        except ValidationError as exc:
            form_errors_add(form, _on_password(exc))
        else:
            if data["how"] == SET_PASSWORD:
                messages.success(request, f"User {user.username} created: they can log in with the password set.")
                return redirect("user-list")
            return render(
                request, "accounts/user_link.html", {"person": user, "link": _link(request, user), "new": True}
            )
    return render(request, "accounts/user_form.html", {"form": form}, status=400 if form.errors else 200)


def _on_password(exc: ValidationError) -> ValidationError:
    """A password validator's refusal (a list of messages) is about the password field."""
    return exc if hasattr(exc, "error_dict") else ValidationError({"password1": exc.messages})


@role_required("admin")
def user_edit(request, pk: int):
    person = get_object_or_404(User, pk=pk)
    initial = {"email": person.email, "role": person.role, "is_active": person.is_active}
    form = UserEditForm(request.POST if request.method == "POST" else None, initial=initial, prefix="user")
    if request.method == "POST" and form.is_valid():
        try:
            services.user_update(user=person, actor=request.user, **form.cleaned_data)
        except ValidationError as exc:
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
    person = get_object_or_404(User, pk=pk)
    if request.POST.get("link"):
        return render(request, "accounts/user_link.html", {"person": person, "link": _link(request, person)})
    password_form = PasswordSetForm(request.POST, prefix="password")
    if password_form.is_valid():
        try:
            services.user_password_set(
                user=person, password=password_form.cleaned_data["password1"], actor=request.user
            )
        except ValidationError as exc:
            form_errors_add(password_form, _on_password(exc))
        else:
            messages.success(request, f"The password of {person.username} was changed.")
            return redirect("user-edit", pk=person.pk)
    initial = {"email": person.email, "role": person.role, "is_active": person.is_active}
    context = {"person": person, "form": UserEditForm(initial=initial, prefix="user"), "password_form": password_form}
    return render(request, "accounts/user_edit.html", context, status=400)
