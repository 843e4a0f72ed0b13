import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")
django_application = get_wsgi_application()

from simia_web.core.uploads import body_bounded  # noqa: E402 (needs the settings set up above)

# Bodies over the request limit are answered before a byte of them is read.
application = body_bounded(django_application)
