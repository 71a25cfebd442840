from django.urls import path

from examples.django_shop.shop import views

urlpatterns = [path("seats/<str:seat>/buy", views.buy)]
