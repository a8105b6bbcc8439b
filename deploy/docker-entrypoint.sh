#!/bin/sh
# The image's entrypoint: for each VAR_FILE set (a secret mounted as a file, e.g. by compose's
# `secrets:`), VAR takes the file's content (its last newline dropped), then the command runs.
# VAR and VAR_FILE both set is an error (which one would win is not obvious).
set -eu
for var in SECRET_KEY DATABASE_URL PGPASSWORD REDIS_URL KDCUBE_REDIS_URL TRAITDECK_TOKEN EMAIL_HOST_PASSWORD; do
  file_var="${var}_FILE"
  eval "file=\${$file_var:-}"
  [ -n "$file" ] || continue
  eval "set_already=\${$var:-}"
  if [ -n "$set_already" ]; then
    echo "traitdeck: both $var and $file_var are set; set one" >&2
    exit 2
  fi
  [ -r "$file" ] || { echo "traitdeck: $file_var names $file, which cannot be read" >&2; exit 2; }
  value=$(cat "$file")
  export "$var=$value"
  unset "$file_var"
done
exec "$@"
