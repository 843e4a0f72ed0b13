from rest_framework.routers import SimpleRouter

from . import api

router = SimpleRouter()
router.register("webhooks", api.WebhookSubscriptionViewSet, basename="api-webhook")

urlpatterns = router.urls
