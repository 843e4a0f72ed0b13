from django import template

from simia_web.accounts.selectors import workspaces_for

register = template.Library()


@register.inclusion_tag("accounts/_workspace_switcher.html", takes_context=True)
def workspace_switcher(context):
    """The current workspace, and a form to switch to another the user may work in (one query)."""
    request = context["request"]
    user = request.user
    choices = list(workspaces_for(user=user).only("id", "slug", "name"))
    current = next((w for w in choices if w.pk == user.current_workspace_id), None)
    return {
        "choices": choices,
        "current": current,
        "next": request.get_full_path(),
        "csrf_token": context.get("csrf_token"),
    }
