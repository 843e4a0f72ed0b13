from django import template

register = template.Library()


@register.filter
def has_role(user, role: str) -> bool:
    return bool(user and user.is_authenticated and user.has_role(role))


@register.filter
def percent(value, total) -> float:
    return round(100 * value / total, 1) if total else 0
