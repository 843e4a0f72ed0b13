from django import template

register = template.Library()


@register.filter
def has_role(user, role: str) -> bool:
    return bool(user and user.is_authenticated and user.has_role(role))


@register.filter
def percent(value, total) -> float:
    return round(100 * value / total, 1) if total else 0


@register.inclusion_tag("curation/_sort_header.html", takes_context=True)
def sort_header(context, label: str, key: str, css: str = ""):
    """A column header that sorts the queue by `key`, and by `-key` when it already does."""
    current = context.get("sort", "")
    descending = current == f"-{key}"
    active = current in (key, f"-{key}")
    target = key if descending or not active else f"-{key}"
    query = context.get("sort_query", "")
    return {
        "label": label,
        "href": f"?{query}&sort={target}" if query else f"?sort={target}",
        "css": css,
        "arrow": ("↓" if descending else "↑") if active else "",
        "aria_sort": ("descending" if descending else "ascending") if active else "none",
    }
