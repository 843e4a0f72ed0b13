from django.contrib.auth import views as auth_views
from django.urls import path

from . import views

urlpatterns = [
    path("users/", views.user_list, name="user-list"),
    path("users/new/", views.user_create, name="user-new"),
    path("users/<int:pk>/", views.user_edit, name="user-edit"),
    path("users/<int:pk>/password/", views.user_password, name="user-password"),
    path("accounts/oidc/login/", views.oidc_login, name="oidc-login"),
    path("accounts/oidc/callback/", views.oidc_callback, name="oidc-callback"),
    path("workspaces/switch/", views.workspace_switch, name="workspace-switch"),
    # Where an invited user, or one whose password an admin reset by link, chooses a password.
    path(
        "accounts/reset/<uidb64>/<token>/",
        auth_views.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
    path("accounts/reset/done/", auth_views.PasswordResetCompleteView.as_view(), name="password_reset_complete"),
]
