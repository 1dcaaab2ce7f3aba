#pragma once
int csi_client_main(int argc, char **argv);
