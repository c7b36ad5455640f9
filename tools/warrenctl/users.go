package main

import (
	"bufio"
	"net/http"
	"strings"
)

// Users and permissions:
//
//	add_user               GET then PUT /api/users/{user}
//	delete_user            DELETE /api/users/{user}
//	change_password        GET then PUT /api/users/{user}
//	set_user_tags          GET then PUT /api/users/{user}
//	list_users             GET /api/users
//	set_permissions        PUT /api/permissions/{vhost}/{user}
//	clear_permissions      DELETE /api/permissions/{vhost}/{user}
//	list_permissions       GET /api/vhosts/{vhost}/permissions
//	list_user_permissions  GET /api/users/{user}/permissions

var userVerbs = []*verb{
	{
		name: "add_user", usage: "<username> [<password>]", min: 1, max: 2,
		summary: "Creates a user; without <password>, reads it from the first line of standard input",
		run:     runAddUser,
	},
	{
		name: "delete_user", usage: "<username>", min: 1, max: 1,
		summary: "Deletes a user",
		run:     runDeleteUser,
	},
	{
		name: "change_password", usage: "<username> [<password>]", min: 1, max: 2,
		summary: "Changes a user's password; without <password>, reads it from standard input",
		run:     runChangePassword,
	},
	{
		name: "set_user_tags", usage: "<username> <tag> [...]", min: 1, max: -1,
		summary: "Sets a user's tags (none: clears them)",
		run:     runSetUserTags,
	},
	{
		name: "list_users", usage: "", min: 0, max: 0,
		summary: "Lists users and their tags",
		columns: userColumns,
		run:     runListUsers,
	},
	{
		name: "set_permissions", usage: "[--vhost <vhost>] <username> <conf> <write> <read>", min: 4, max: 4,
		summary: "Sets a user's permissions in a virtual host",
		run:     runSetPermissions,
	},
	{
		name: "clear_permissions", usage: "[--vhost <vhost>] <username>", min: 1, max: 1,
		summary: "Revokes a user's permissions in a virtual host",
		run:     runClearPermissions,
	},
	{
		name: "list_permissions", usage: "[--vhost <vhost>]", min: 0, max: 0,
		summary: "Lists the permissions in a virtual host",
		run:     runListPermissions,
	},
	{
		name: "list_user_permissions", usage: "<username>", min: 1, max: 1,
		summary: "Lists a user's permissions in every virtual host",
		run:     runListUserPermissions,
	},
}

var userColumns = []column{fieldAt("user", "name"), field("tags")}

// userBody is PUT /api/users/{user}. RabbitMQ requires tags (a
// comma-separated string); it keeps the password when given password_hash
// and clears it when given neither.
type userBody struct {
	Password         *string `json:"password,omitempty"`
	PasswordHash     *string `json:"password_hash,omitempty"`
	HashingAlgorithm string  `json:"hashing_algorithm,omitempty"`
	Tags             string  `json:"tags"`
}

// passwordArg returns args[1], or the first line of standard input.
func (c *cmd) passwordArg() string {
	if len(c.args) > 1 {
		return c.args[1]
	}
	line, _ := bufio.NewReader(c.stdin).ReadString('\n')
	return strings.TrimRight(line, "\r\n")
}

func userMissing(err error, user string) error {
	return notFound(err, exitNoUser, `User "%s" does not exist`, user)
}

func runAddUser(c *cmd) error {
	user := c.args[0]
	password := c.passwordArg()
	c.banner(`Adding user "%s" ...`, user)
	// PUT would silently change an existing user's password and tags;
	// rabbitmqctl refuses instead.
	_, err := c.api.get(c.ctx, apiPath("users", user))
	if err == nil {
		return failf(exitSoftware, `User "%s" already exists`, user)
	}
	if !isNotFound(err) {
		return err
	}
	err = c.api.send(c.ctx, http.MethodPut, apiPath("users", user), userBody{Password: &password})
	if err != nil {
		return err
	}
	if c.json {
		c.done()
		return nil
	}
	if !c.quiet && !c.silent {
		c.printf("Done. Don't forget to grant the user permissions to some virtual hosts! See 'warrenctl help set_permissions' to learn more.\n")
	}
	return nil
}

func runDeleteUser(c *cmd) error {
	user := c.args[0]
	c.banner(`Deleting user "%s" ...`, user)
	if err := c.api.send(c.ctx, http.MethodDelete, apiPath("users", user), nil); err != nil {
		return userMissing(err, user)
	}
	c.done()
	return nil
}

// tagsText returns a user's tags as PUT wants them: RabbitMQ 3.10+ lists
// them, older versions and some users (created by rabbitmqctl) have a
// comma-separated string.
func tagsText(v jv) string {
	if v.kind != kArray {
		return v.str()
	}
	tags := make([]string, len(v.vals))
	for i, t := range v.vals {
		tags[i] = t.str()
	}
	return strings.Join(tags, ",")
}

func runChangePassword(c *cmd) error {
	user := c.args[0]
	password := c.passwordArg()
	c.banner(`Changing password for user "%s" ...`, user)
	u, err := c.api.get(c.ctx, apiPath("users", user))
	if err != nil {
		return userMissing(err, user)
	}
	body := userBody{Password: &password, Tags: tagsText(u.get("tags"))}
	if err := c.api.send(c.ctx, http.MethodPut, apiPath("users", user), body); err != nil {
		return userMissing(err, user)
	}
	c.done()
	return nil
}

func runSetUserTags(c *cmd) error {
	user, tags := c.args[0], c.args[1:]
	c.banner(`Setting tags for user "%s" to [%s] ...`, user, strings.Join(tags, ", "))
	u, err := c.api.get(c.ctx, apiPath("users", user))
	if err != nil {
		return userMissing(err, user)
	}
	// The API has no "tags only" update: PUT must carry the password hash
	// or it clears the password.
	hash := u.get("password_hash")
	if hash.kind != kString {
		return failf(exitSoftware, `cannot keep the password of user "%s": GET %s has no password_hash`, user, apiPath("users", user))
	}
	body := userBody{
		PasswordHash:     &hash.s,
		HashingAlgorithm: u.get("hashing_algorithm").str(),
		Tags:             strings.Join(tags, ","),
	}
	if err := c.api.send(c.ctx, http.MethodPut, apiPath("users", user), body); err != nil {
		return userMissing(err, user)
	}
	c.done()
	return nil
}

func runListUsers(c *cmd) error {
	c.banner("Listing users ...")
	rows, err := c.api.getList(c.ctx, apiPath("users"))
	if err != nil {
		return err
	}
	c.printListing(listing{cols: userColumns, rows: rows})
	return nil
}

type permissionsBody struct {
	Configure string `json:"configure"`
	Write     string `json:"write"`
	Read      string `json:"read"`
}

func runSetPermissions(c *cmd) error {
	user := c.args[0]
	c.banner(`Setting permissions for user "%s" in vhost "%s" ...`, user, c.vhost)
	body := permissionsBody{Configure: c.args[1], Write: c.args[2], Read: c.args[3]}
	err := c.api.send(c.ctx, http.MethodPut, apiPath("permissions", c.vhost, user), body)
	if err != nil {
		return notFound(err, exitDataErr, `Virtual host "%s" or user "%s" does not exist`, c.vhost, user)
	}
	c.done()
	return nil
}

func runClearPermissions(c *cmd) error {
	user := c.args[0]
	c.banner(`Clearing permissions for user "%s" in vhost "%s" ...`, user, c.vhost)
	err := c.api.send(c.ctx, http.MethodDelete, apiPath("permissions", c.vhost, user), nil)
	if err != nil {
		return notFound(err, exitDataErr, `User "%s" has no permissions in vhost "%s"`, user, c.vhost)
	}
	c.done()
	return nil
}

var permissionColumns = []column{field("user"), field("configure"), field("write"), field("read")}

func runListPermissions(c *cmd) error {
	c.banner(`Listing permissions for vhost "%s" ...`, c.vhost)
	rows, err := c.api.getList(c.ctx, apiPath("vhosts", c.vhost, "permissions"))
	if err != nil {
		return vhostMissing(err, c.vhost)
	}
	c.printListing(listing{cols: permissionColumns, rows: rows, blankWhenEmpty: true})
	return nil
}

var userPermissionColumns = []column{field("vhost"), field("configure"), field("write"), field("read")}

func runListUserPermissions(c *cmd) error {
	user := c.args[0]
	c.banner(`Listing permissions for user "%s" ...`, user)
	rows, err := c.api.getList(c.ctx, apiPath("users", user, "permissions"))
	if err != nil {
		return userMissing(err, user)
	}
	c.printListing(listing{cols: userPermissionColumns, rows: rows, blankWhenEmpty: true})
	return nil
}
