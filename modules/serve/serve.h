#pragma once
int serve_main(int argc, char **argv);
