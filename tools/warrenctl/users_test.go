package main

import "testing"

func TestUserVerbs(t *testing.T) {
	user := get("/api/users/ctl-user", rmq("user-ctl-user.json"))
	runCases(t, []cliCase{{
		name:   "add_user",
		args:   []string{"add_user", "ctl-new", "s3cret"},
		routes: []route{notFound404("GET", "/api/users/ctl-new"), created("PUT", "/api/users/ctl-new")},
		want: []sent{
			req("GET", "/api/users/ctl-new"),
			withBody("PUT", "/api/users/ctl-new", `{"password":"s3cret","tags":""}`),
		},
	}, {
		name:   "add_user_quiet_password_from_stdin",
		args:   []string{"-q", "add_user", "ctl-new"},
		stdin:  "from stdin\nignored\n",
		routes: []route{notFound404("GET", "/api/users/ctl-new"), created("PUT", "/api/users/ctl-new")},
		want: []sent{
			req("GET", "/api/users/ctl-new"),
			withBody("PUT", "/api/users/ctl-new", `{"password":"from stdin","tags":""}`),
		},
	}, {
		name:   "add_user_exists",
		args:   []string{"add_user", "ctl-user", "s3cret"},
		routes: []route{user},
		want:   []sent{req("GET", "/api/users/ctl-user")},
		code:   exitSoftware,
	}, {
		name: "add_user_no_args",
		args: []string{"add_user"},
		code: exitUsage,
	}, {
		name: "add_user_too_many_args",
		args: []string{"add_user", "a", "b", "c"},
		code: exitUsage,
	}, {
		name:   "delete_user",
		args:   []string{"delete_user", "ctl-user"},
		routes: []route{noContent("DELETE", "/api/users/ctl-user")},
		want:   []sent{req("DELETE", "/api/users/ctl-user")},
	}, {
		name:   "delete_user_missing",
		args:   []string{"delete_user", "ctl-nouser"},
		routes: []route{notFound404("DELETE", "/api/users/ctl-nouser")},
		want:   []sent{req("DELETE", "/api/users/ctl-nouser")},
		code:   exitNoUser,
	}, {
		name:   "change_password",
		args:   []string{"change_password", "ctl-user", "n3w"},
		routes: []route{user, noContent("PUT", "/api/users/ctl-user")},
		want: []sent{
			req("GET", "/api/users/ctl-user"),
			withBody("PUT", "/api/users/ctl-user", `{"password":"n3w","tags":"monitoring,management"}`),
		},
	}, {
		name:   "change_password_missing",
		args:   []string{"change_password", "ctl-nouser", "n3w"},
		routes: []route{notFound404("GET", "/api/users/ctl-nouser")},
		want:   []sent{req("GET", "/api/users/ctl-nouser")},
		code:   exitNoUser,
	}, {
		name:   "set_user_tags",
		args:   []string{"set_user_tags", "ctl-user", "administrator", "management"},
		routes: []route{user, noContent("PUT", "/api/users/ctl-user")},
		want: []sent{
			req("GET", "/api/users/ctl-user"),
			withBody("PUT", "/api/users/ctl-user",
				`{"password_hash":"Snz2uAuGnTzt4GogQZZLGZfRim39TJJxyIbOwwj3A1Ow6YMf","hashing_algorithm":"rabbit_password_hashing_sha256","tags":"administrator,management"}`),
		},
	}, {
		name:   "set_user_tags_none_json",
		args:   []string{"set_user_tags", "ctl-user", "--formatter", "json"},
		routes: []route{user, noContent("PUT", "/api/users/ctl-user")},
		want: []sent{
			req("GET", "/api/users/ctl-user"),
			withBody("PUT", "/api/users/ctl-user",
				`{"password_hash":"Snz2uAuGnTzt4GogQZZLGZfRim39TJJxyIbOwwj3A1Ow6YMf","hashing_algorithm":"rabbit_password_hashing_sha256","tags":""}`),
		},
	}, {
		// Without the hash, PUT would clear the password: refuse.
		name:   "set_user_tags_no_hash",
		args:   []string{"set_user_tags", "ctl-user", "management"},
		routes: []route{{method: "GET", uri: "/api/users/ctl-user", status: 200, body: `{"name":"ctl-user","tags":[]}`}},
		want:   []sent{req("GET", "/api/users/ctl-user")},
		code:   exitSoftware,
	}, {
		name:   "set_user_tags_missing",
		args:   []string{"set_user_tags", "ctl-nouser", "management"},
		routes: []route{notFound404("GET", "/api/users/ctl-nouser")},
		want:   []sent{req("GET", "/api/users/ctl-nouser")},
		code:   exitNoUser,
	}, {
		name:   "list_users",
		args:   []string{"list_users"},
		routes: []route{get("/api/users", rmq("users.json"))},
		want:   []sent{req("GET", "/api/users")},
	}, {
		name:   "list_users_json",
		args:   []string{"list_users", "--formatter", "json"},
		routes: []route{get("/api/users", rmq("users.json"))},
		want:   []sent{req("GET", "/api/users")},
	}, {
		name: "list_users_columns",
		args: []string{"list_users", "name"},
		code: exitUsage,
	}, {
		name:   "set_permissions",
		args:   []string{"set_permissions", "-p", "ctl-v", "ctl-user", "^ctl-.*", ".*", ".*"},
		routes: []route{created("PUT", "/api/permissions/ctl-v/ctl-user")},
		want:   []sent{withBody("PUT", "/api/permissions/ctl-v/ctl-user", `{"configure":"^ctl-.*","write":".*","read":".*"}`)},
	}, {
		name: "set_permissions_missing_vhost",
		args: []string{"set_permissions", "ctl-user", ".*", ".*", ".*", "--vhost", "ctl-nope"},
		routes: []route{{method: "PUT", uri: "/api/permissions/ctl-nope/ctl-user", status: 400,
			file: rmq("permissions-not-found.json")}},
		want: []sent{withBody("PUT", "/api/permissions/ctl-nope/ctl-user", `{"configure":".*","write":".*","read":".*"}`)},
		code: exitDataErr,
	}, {
		name:   "clear_permissions",
		args:   []string{"clear_permissions", "-p", "ctl-v", "ctl-user"},
		routes: []route{noContent("DELETE", "/api/permissions/ctl-v/ctl-user")},
		want:   []sent{req("DELETE", "/api/permissions/ctl-v/ctl-user")},
	}, {
		name:   "clear_permissions_missing",
		args:   []string{"clear_permissions", "ctl-nouser"},
		routes: []route{notFound404("DELETE", "/api/permissions/%2F/ctl-nouser")},
		want:   []sent{req("DELETE", "/api/permissions/%2F/ctl-nouser")},
		code:   exitDataErr,
	}, {
		name:   "list_permissions",
		args:   []string{"list_permissions"},
		routes: []route{get("/api/vhosts/%2F/permissions", rmq("vhost-permissions-root.json"))},
		want:   []sent{req("GET", "/api/vhosts/%2F/permissions")},
	}, {
		name:   "list_permissions_empty",
		args:   []string{"list_permissions", "-p", "ctl-v2"},
		routes: []route{emptyList("/api/vhosts/ctl-v2/permissions")},
		want:   []sent{req("GET", "/api/vhosts/ctl-v2/permissions")},
	}, {
		name:   "list_permissions_empty_json",
		args:   []string{"list_permissions", "-p", "ctl-v2", "--formatter=json"},
		routes: []route{emptyList("/api/vhosts/ctl-v2/permissions")},
		want:   []sent{req("GET", "/api/vhosts/ctl-v2/permissions")},
	}, {
		name:   "list_permissions_missing_vhost",
		args:   []string{"list_permissions", "-p", "ctl-nope"},
		routes: []route{notFound404("GET", "/api/vhosts/ctl-nope/permissions")},
		want:   []sent{req("GET", "/api/vhosts/ctl-nope/permissions")},
		code:   exitDataErr,
	}, {
		name:   "list_user_permissions",
		args:   []string{"list_user_permissions", "ctl-user"},
		routes: []route{get("/api/users/ctl-user/permissions", rmq("user-permissions-ctl-user.json"))},
		want:   []sent{req("GET", "/api/users/ctl-user/permissions")},
	}, {
		name:   "list_user_permissions_silent",
		args:   []string{"-s", "list_user_permissions", "ctl-user"},
		routes: []route{get("/api/users/ctl-user/permissions", rmq("user-permissions-ctl-user.json"))},
		want:   []sent{req("GET", "/api/users/ctl-user/permissions")},
	}, {
		name:   "list_user_permissions_missing",
		args:   []string{"list_user_permissions", "ctl-nouser"},
		routes: []route{notFound404("GET", "/api/users/ctl-nouser/permissions")},
		want:   []sent{req("GET", "/api/users/ctl-nouser/permissions")},
		code:   exitNoUser,
	}})
}
