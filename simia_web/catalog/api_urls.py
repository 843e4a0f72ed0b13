from rest_framework.routers import SimpleRouter

from . import api

router = SimpleRouter()
router.register("domains", api.DomainViewSet, basename="api-domain")
router.register("apis", api.ApiViewSet, basename="api-api")
router.register("tasks", api.TaskViewSet, basename="api-task")
router.register("seeds", api.SeedViewSet, basename="api-seed")

urlpatterns = router.urls
