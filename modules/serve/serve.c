#include "modules/serve/serve.h"
int serve_main(int argc, char **argv) { (void)argc; (void)argv; return 0; }
