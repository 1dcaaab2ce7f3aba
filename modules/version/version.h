#pragma once
int version_main(int argc, char **argv);
