# postern's native addon (SPEC §2): one C file, plain Node-API, no dependencies.
{
  "targets": [
    {
      "target_name": "postern_native",
      "sources": ["peercred.c"],
      "defines": ["NAPI_VERSION=8"],
      "cflags": ["-Wall", "-Wextra", "-O2"]
    }
  ]
}
