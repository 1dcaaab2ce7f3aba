/* aws-k8s discoverer: Deckhouse's cloud-data-discoverer for AWS (see disc_internal.h). */
#pragma once

int discoverer_main(int argc, char **argv);
