from django import template

register = template.Library()


@register.filter
def rate(value) -> str:
    """A share of the population as a percentage with one decimal ("4.1%"); a dash when there is none."""
    if value is None:
        return "—"
    return f"{100 * float(value):.1f}%"
